"""The server's own prefix cache in every level, against a real OpenAI-compatible server (llama.cpp's
llama-server with --metrics, on the tiny model): prompts that share a long prefix raise the hit
rate its /metrics report over prompts of the same lengths that share nothing, the headless table
shows that hit rate, the recording keeps it per level and per window, and the first level is
marked cold, the next warm from earlier levels."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from engine import format as fmt
from engine.events import LevelResult, WindowResult
from engine.record.reader import Recording
from tests.openai_server.test_real_server_sweep import QUICK

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("the of and to in is was for on that with as by at from it an be this are or have not but his they which "
         "one you had all were her can there their would been has more when if will no out so up said what").split()
PROMPTS = 1500  # unique prompts: more than a level sends, so no prompt is sent twice
PREFIX, SUFFIX, GROUPS = 96, 16, 2


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _write(path: Path, shared: bool) -> Path:
    """PROMPTS prompts of PREFIX + SUFFIX words: GROUPS shared prefixes, or every word its own."""
    rng = random.Random(57)
    prefixes = [_words(rng, PREFIX) for _ in range(GROUPS)]
    with path.open("w") as f:
        for k in range(PROMPTS):
            head = prefixes[k % GROUPS] if shared else _words(rng, PREFIX)
            f.write(json.dumps({"text": f"{head} {_words(rng, SUFFIX)}"}) + "\n")
    return path


def _sweep(server, prompts: Path, out: Path) -> tuple[list[LevelResult], list[WindowResult], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "tui.cli", "--record", "-o", str(out), "--url", server.base_url, *QUICK,
         "--set", "load.transport=chat_stream", "--set", "load.concurrency=1,2",
         "--set", "load.output_tokens=8", "--input-data", str(prompts)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    (path,) = out.glob("*.sqlite")
    with Recording.open(path) as rec:
        levels = [e for e in rec.events(("level_result",)) if isinstance(e, LevelResult)]
        windows = [e for e in rec.events(("window",)) if isinstance(e, WindowResult) and not e.warmup]
    return levels, windows, proc.stdout


@pytest.mark.slow
def test_shared_prefixes_raise_the_servers_hit_rate_and_the_table_shows_it(openai_server, tmp_path: Path) -> None:
    shared, shared_windows, shared_out = _sweep(openai_server, _write(tmp_path / "shared.jsonl", True), tmp_path / "a")
    unique, _, _ = _sweep(openai_server, _write(tmp_path / "unique.jsonl", False), tmp_path / "b")
    for levels in (shared, unique):
        assert [r.level for r in levels] == [1.0, 2.0]
        assert all(r.cache is not None and r.cache.server == "llama.cpp" for r in levels)
        assert all(r.cache.prompt_tokens and r.cache.hit_rate is not None for r in levels if r.cache)
        # llama.cpp publishes neither: not measured, never 0
        assert all(r.cache.kv_usage is None and r.cache.preemptions is None for r in levels if r.cache)
    hits = {name: [r.cache.hit_rate for r in levels if r.cache] for name, levels in
            (("shared", shared), ("unique", unique))}
    # 96 of 112 words shared with many prompts before: most of each prompt comes from the cache;
    # prompts that share nothing find at most their first tokens (the chat template's, a word or two)
    assert all(h is not None and h > 0.6 for h in hits["shared"]), hits
    assert all(h is not None and h < 0.3 for h in hits["unique"]), hits
    # the second level found what the first one left; the first, after the other run's, found the server used
    assert [r.cache.state for r in shared if r.cache] in (["cold", "warm from earlier levels"],
                                                           ["warm from before this sweep", "warm from earlier levels"])
    assert [r.cache.state for r in unique if r.cache] == ["warm from before this sweep", "warm from earlier levels"]
    assert any(w.cache is not None and w.cache.hit_rate is not None for w in shared_windows)  # per window too
    header = next(line for line in shared_out.splitlines() if "prefix hit" in line or " hit " in line)
    assert "tok/s" in header
    rows = [line for line in shared_out.splitlines() if line.startswith("level ")]
    assert len(rows) == 2 and all(fmt.percent(r.cache.hit_rate) in row for r, row in zip(shared, rows, strict=True)
                                  if r.cache), rows
