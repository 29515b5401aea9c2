"""The box check at the start of a session, for real (CLI subprocess, this CPU-only machine):
recorded as an event before the server starts, in the report, skipped with --no-check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.record.reader import Recording

REPO = Path(__file__).resolve().parents[3]


def session(out: Path, *flags: str) -> tuple[subprocess.CompletedProcess, Path]:
    # the smallest real session: identity, one level, short windows (a session that fails on bad
    # input leaves no recording, so this one must succeed)
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "--record", "--output", str(out),
                           "--set", "model.name=identity", "--set", "load.concurrency=1", "--set", "load.window_ms=300",
                           "--set", "load.warmup_s=0", "--set", "load.max_windows=3", "--set", "load.min_window_requests=5",
                           "--set", "load.stability_percent=90", *flags], cwd=REPO, capture_output=True, text=True,
                          timeout=600)  # a hang guard: a busy box slows it, never fails it
    (path,) = out.glob("*.sqlite")
    return proc, path


@pytest.mark.server
def test_the_check_is_recorded_before_the_server_and_reported(tmp_path: Path):
    proc, path = session(tmp_path)
    assert proc.returncode == 0, proc.stderr
    with Recording.open(path) as rec:
        events = list(rec.events())
    kinds = [e.kind for e in events]
    assert kinds.index("session_started") < kinds.index("box_check") < kinds.index("server_ready") < kinds.index("session_ended")
    check = next(e for e in events if e.kind == "box_check")
    assert check.gpus == 0 and {i.name for i in check.items} >= {"cpu cores", "ram", "disk free"}
    assert "box check done in" in proc.stdout
    out = subprocess.run([sys.executable, "-m", "tui.cli", "export", "-f", "md", str(path)], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = path.with_suffix(".md").read_text()
    assert "## Box check" in report and check.summary in report
    assert "| host | cpu cores |" in report


@pytest.mark.server
def test_no_check_skips_it(tmp_path: Path):
    proc, path = session(tmp_path, "--no-check")
    assert proc.returncode == 0, proc.stderr
    with Recording.open(path) as rec:
        assert "box_check" not in rec.event_counts()
    assert "box check" not in proc.stdout
