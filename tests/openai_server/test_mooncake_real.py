"""A Mooncake trace replayed as prompts against the real llama-server (tiny model): requests whose
hash ids share leading blocks share the server's cache as the trace says (its /metrics' hit rate),
against a trace of the same lengths whose ids never recur."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.openai_server.test_server_cache import _sweep

LINES, BLOCK, BLOCKS = 1500, 16, 7  # 7 blocks of 16 words a request: 6 shared in the first trace, then its own


def _trace(path: Path, shared: bool) -> Path:
    with path.open("w") as f:
        for k in range(LINES):
            head = [100 * (k % 2) + j for j in range(BLOCKS - 1)] if shared else \
                [10_000 + k * BLOCKS + j for j in range(BLOCKS - 1)]
            f.write(json.dumps({"timestamp": k * 10, "input_length": BLOCK * BLOCKS, "output_length": 6,
                                "hash_ids": [*head, 1_000_000 + k]}) + "\n")
    return path


@pytest.mark.slow
def test_a_traces_shared_hash_ids_are_the_servers_cache_hits(openai_server, tmp_path: Path) -> None:
    runs = {}
    for name, shared in (("shared", True), ("unique", False)):
        args = ("--input-data", str(_trace(tmp_path / f"{name}.jsonl", shared)), "--set", f"load.block_tokens={BLOCK}")
        levels, _, _ = _sweep(openai_server, args, tmp_path / name)
        runs[name] = [r.cache.hit_rate for r in levels if r.cache]
        assert all(r.stream and r.stream.tokens_per_request == 6 for r in levels)  # output_length, not load.output_tokens (8)
    assert len(runs["shared"]) == 2 and all(h is not None and h > 0.6 for h in runs["shared"]), runs
    assert len(runs["unique"]) == 2 and all(h is not None and h < 0.3 for h in runs["unique"]), runs


@pytest.mark.slow
def test_a_trace_replays_with_its_timing_at_its_own_rate(openai_server, tmp_path: Path) -> None:
    import subprocess
    import sys

    from engine.events import LevelStarted
    from engine.record.reader import Recording
    from tests.openai_server.test_real_server_sweep import QUICK
    from tests.openai_server.test_server_cache import ROOT

    path = tmp_path / "bursty.jsonl"
    with path.open("w") as f:  # bursts of 4 requests at once, every 0.4 s: 10 requests/s on average
        for k in range(400):
            f.write(json.dumps({"timestamp": (k // 4) * 400, "input_length": 24, "output_length": 4,
                                "hash_ids": [k]}) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tui.cli", "--record", "-o", str(tmp_path), "--url", openai_server.base_url, *QUICK,
         "--set", "load.mode=rate", "--set", "load.rates=9.975", "--set", "load.arrival=trace",
         "--input-data", str(path), "--set", f"load.block_tokens={BLOCK}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    # (399 gaps over 39.6 s: 10.075 a second) said once, so that a rate of the trace's own is chosen
    assert "the trace's own rate is 10.1 requests/s" in proc.stdout
    (rec,) = tmp_path.glob("*.sqlite")
    with Recording.open(rec) as r:
        started = [e for e in r.events(("level_started",)) if isinstance(e, LevelStarted)]
        levels = [e for e in r.events(("level_result",))]
    assert [s.arrival for s in started] == ["trace"] and levels and levels[-1].requests > 0


def test_a_trace_whose_time_does_not_pass_is_one_line(openai_server, tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.openai_server.test_server_cache import ROOT

    path = tmp_path / "flat.jsonl"
    path.write_text("".join(json.dumps({"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": [k]})
                            + "\n" for k in range(5)))
    proc = subprocess.run(
        [sys.executable, "-m", "tui.cli", "--no-record", "--no-check", "--url", openai_server.base_url,
         "--set", "load.mode=rate", "--set", "load.rates=5", "--set", "load.arrival=trace", "--input-data", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "timestamps advance" in lines[0], proc.stderr
