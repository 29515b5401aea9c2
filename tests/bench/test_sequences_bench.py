"""bench sequences: its table (ratio to perf_analyzer, a run with no result shown as not measured)
and one line for a bad level list; no server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.sequences import summary

ROOT = Path(__file__).resolve().parents[2]


def _row(level: int, rnd: int, tool: str, infer_s: float | None, seq_s: float | None = None) -> dict:
    return {"level": level, "round": rnd, "tool": tool, "ok": infer_s is not None, "infer_s": infer_s, "seq_s": seq_s,
            "p50_ms": 0.5, "p99_ms": 2.0, "first_p99_ms": 3.0 if tool == "ours" else None,
            "later_p99_ms": 1.5 if tool == "ours" else None}


def test_the_table_gives_each_rounds_ratio_and_says_not_measured() -> None:
    rows = [_row(1, 0, "ours", 1100, 55), _row(1, 0, "pa", 1000, 50),
            _row(1, 1, "pa", 1000, 50), _row(1, 1, "ours", 900, 45), _row(2, 0, "ours", 500, 25), _row(2, 0, "pa", None)]
    lines = summary(rows, [1, 2])
    ours1 = next(line for line in lines if line.startswith("| 1 | ours"))
    assert "| 1,100, 900 | 1,000 | 20 % | 1.00 [0.90-1.10] | 50.0 |" in ours1
    assert "| 3.00 | 1.50 |" in ours1  # the first step's p99 apart from the later steps'
    pa2 = next(line for line in lines if line.startswith("| 2 | perf_analyzer"))
    assert "| not measured | not measured |" in pa2  # no result: never shown as 0
    ours2 = next(line for line in lines if line.startswith("| 2 | ours"))
    assert "| not measured |" in ours2  # no ratio without perf_analyzer's figure


def test_a_bad_level_list_is_one_line_and_exit_2() -> None:
    done = subprocess.run([sys.executable, "-m", "bench", "sequences", "--levels", "1,x"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == "sequences: --levels: invalid literal for int() with base 10: 'x'"
