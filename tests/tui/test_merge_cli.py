"""Two headless runs of one plan against one real Triton server, started together (load.start_at),
then `gpuscale-tui merge`: the merged throughput is the two runs' sum, and the merged
percentiles are checked against the raw latency samples of both runs, which each run writes
through the developer key load.dev_samples_dir (each level's merged-window samples, int64 ns)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.latency_histogram import RELATIVE_ERROR
from engine.analysis.percentiles import PERCENTILES, latency_stats
from engine.events import LevelResult
from engine.record.reader import Recording

ROOT = Path(__file__).resolve().parents[2]
PLAN = ["--set", "load.max_trials=1", "--set", "load.contended_percent=100",  # the box-noise rule off (tests/conftest.py)
        "--set", "model.name=identity", "--set", "load.window_ms=1000", "--set", "load.warmup_s=0.3",
        "--set", "load.max_windows=3", "--set", "load.concurrency=2,4", "--no-check"]
START_IN_S = 20  # both processes import, reach the server and start their workers before it


def _levels(path: Path) -> dict[float, LevelResult]:
    with Recording.open(path) as rec:
        return {lv.result.level: lv.result for lv in rec.summary().levels}


@pytest.mark.slow
@pytest.mark.server
def test_two_hosts_started_together_merge_into_their_sum(identity_server, tmp_path: Path) -> None:
    start_at = time.time() + START_IN_S
    procs = []
    for host in ("a", "b"):
        out = tmp_path / host
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "run", "--record", "-o", str(out), *PLAN, "--url", identity_server.http_url,
             "--set", f"load.start_at={start_at:.3f}", "--set", f"load.dev_samples_dir={out / 'samples'}"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "load.start_at was" not in out + err  # both were ready before the instant
    (a,) = (tmp_path / "a").glob("*.sqlite")
    (b,) = (tmp_path / "b").glob("*.sqlite")
    for path in (a, b):  # neither began before the instant
        with Recording.open(path) as rec:
            first = next(e for e in rec.events(("level_started",)))
        assert first.ts >= start_at
    merged_path = tmp_path / "merged.sqlite"
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "merge", str(a), str(b), "-o", str(merged_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    merged, runs = _levels(merged_path), [_levels(a), _levels(b)]
    assert sorted(merged) == [4.0, 8.0]  # two hosts at 2 and 4 in flight
    for c in (2, 4):
        level = merged[2.0 * c]
        total = sum(r[c].throughput_ips for r in runs)
        assert abs(level.throughput_ips - total) <= 0.02 * total
        assert level.requests == sum(r[c].requests for r in runs)
        index = runs[0][c].index
        raw = np.concatenate([np.fromfile(tmp_path / h / "samples" / f"level{index}_trial1.i64", np.int64)
                              for h in ("a", "b")])
        exact = latency_stats(raw)  # perf_analyzer's rule over both runs' raw samples
        assert level.latency.count == exact.count == raw.size
        for q in PERCENTILES:
            want = getattr(exact, f"p{q}")
            assert want <= getattr(level.latency, f"p{q}") <= want * (1 + RELATIVE_ERROR), q
        assert (level.latency.min, level.latency.max) == (exact.min, exact.max)
    # the merged recording exports like any other
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "export", str(merged_path), "-f", "csv", "-f", "md",
                           "--out", str(tmp_path / "export")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Load hosts" in next((tmp_path / "export").glob("*.md")).read_text()
