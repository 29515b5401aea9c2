"""`gpuscale-tui --url http://127.0.0.1:P/v1` against a real OpenAI-compatible server (llama.cpp's
llama-server on the tiny model): each of the four transports sweeps, the levels carry the
server's own token counts (usage), streams their TTFT and ITL, and $/Mtok is priced from them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.events import LevelResult
from engine.record.reader import Recording

ROOT = Path(__file__).resolve().parents[2]
# Short levels: two windows of 300 ms, each extended until it holds 10 answers (the window waits
# for the requests, not the clock, so a busy box stretches it rather than thinning it; the default
# of 50 made a level here take seconds); stability_percent=1000: any two windows agree.
QUICK = ["--set", "load.max_trials=1", "--set", "load.contended_percent=100", "--set", "load.window_ms=300",
         "--set", "load.warmup_s=0.3", "--set", "load.max_windows=4", "--set", "load.stability_percent=1000",
         "--set", "load.min_window_requests=10", "--set", "load.stable_windows=2", "--no-check"]
OUTPUT_TOKENS = 12


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["chat_stream", "chat", "completions_stream", "completions"])
def test_each_transport_records_the_servers_tokens(openai_server, transport: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tui.cli", "--record", "-o", str(tmp_path), "--url", openai_server.base_url, *QUICK,
         "--set", f"load.transport={transport}", "--set", "load.concurrency=1,2",
         "--set", f"load.output_tokens={OUTPUT_TOKENS}", "--set", "load.input_tokens=6",
         "--set", "hardware.cost_per_hour=2"],
        cwd=ROOT, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    (path,) = tmp_path.glob("*.sqlite")
    with Recording.open(path) as rec:
        levels = [e for e in rec.events(("level_result",)) if isinstance(e, LevelResult)]
    assert [r.level for r in levels] == [1.0, 2.0]
    for r in levels:
        s = r.stream
        assert r.errors == 0 and r.requests > 0 and s is not None, r.error_messages
        assert not s.tokens_are_words  # the server's usage, not our word count
        assert s.tokens_per_request == OUTPUT_TOKENS  # max_tokens with ignore_eos: exactly that many
        # the prompt's tokens as llama.cpp's tokenizer and chat template count them, not our 6 words
        assert s.input_tokens_per_request is not None and s.input_tokens_per_request > 0
        assert s.output_tokens_per_s > 0 and s.ttft.p50 is not None and s.ttft.p50 > 0
        if transport.endswith("_stream"):
            # chunks stamped one by one: most gaps measured, or the level says why not
            assert (s.itl.count > 0 and s.itl.p50 is not None) or s.itl_note, s
        else:
            assert s.itl.count == 0  # a whole answer has no gaps to time
    assert "$/Mtok" in proc.stdout  # priced from those tokens
