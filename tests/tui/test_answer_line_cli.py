"""The end of a headless run from the command line: one short answer line, printed once, last,
with each level left out and its reason above it."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.events import LevelResult
from tests.cli_runner import run_cli
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.structs import replace


@pytest.mark.slow  # writes a synthetic recording and replays it through the CLI
def test_a_contended_run_ends_with_one_short_answer_line(tmp_path: Path) -> None:
    events = synthetic_session(SyntheticRun(levels=[1, 2, 4, 8], windows_per_level=2, gpu_count=1, variant="1x",
                                            probe=False))
    levels = sorted({e.level for e in events if isinstance(e, LevelResult)})
    share = {level: 0.77 + 0.08 * i / (len(levels) - 1) for i, level in enumerate(levels)}
    events = [replace(e, status="contended", others_cpu=share[e.level]) if isinstance(e, LevelResult)
              else e for e in events]
    recording = record_events(tmp_path / "run.sqlite", events)
    proc = run_cli("replay", "--headless", str(recording), timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.rstrip().splitlines()
    answers = [line for line in lines if line.startswith("answer: ")]
    n = len(levels)
    assert answers == [f"answer: not decided: {n} of {n} levels contended (others 77–85 % of the CPU); "
                       "measure on a quieter box"], proc.stdout[-3000:]
    assert lines[-1] == answers[0] and len(answers[0]) <= 160
    left = [line for line in lines if line.strip().startswith("left out: ")]
    assert len(left) == n and all("contended (others took " in line for line in left)
