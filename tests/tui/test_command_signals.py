"""Commands without a session stopped by a signal: export ends 130 on SIGTERM or SIGHUP with no
temporary file left (a file already published stays whole), and `server` ends 130 on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session

# SIGSTOP to the CLI process: the real interpreter, not the suite's CLI zygote (tests/cli_zygote.py)
pytestmark = pytest.mark.real_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def big_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Large enough that its JSON export takes a while to write (tens of MB)."""
    run = SyntheticRun(levels=[1, 4, 8, 16], windows_per_level=10, gpu_count=8, variant="8x", telemetry_hz=20.0,
                       probe=False)
    return record_events(tmp_path_factory.mktemp("big") / "big.sqlite", synthetic_session(run))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_export_stopped_by_a_signal_exits_130_and_leaves_no_tmp(sig, big_recording, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "export", str(big_recording), "-f", "json",
                             "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(out.glob("*.tmp")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    os.kill(proc.pid, signal.SIGSTOP)  # hold it mid-write: the signal lands while the file is half done
    assert list(out.glob("*.tmp")), "the export finished before it could be interrupted"
    os.kill(proc.pid, sig)
    os.kill(proc.pid, signal.SIGCONT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and err.strip().endswith("interrupted"), err
    left = list(out.iterdir())
    # no temporary file; a signal that lands after the file was published leaves it whole
    assert not [p for p in left if p.name.endswith(".tmp")] and len(left) <= 1, f"left behind: {left}"
    if left:
        json.loads(left[0].read_text(encoding="utf-8"))


@pytest.mark.server
def test_server_command_stopped_by_sigterm_exits_130():
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "server", "--model", "identity", "--variant", "cpu"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "Ctrl-C stops the server" in line:
            break
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(lines) + rest
