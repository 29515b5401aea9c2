"""A fatal error reaches the headless log once (its "fatal error" line) and stderr once: the end
lines say the outcome without repeating it. Through a real session whose start fails (an unknown
embedded model: no server is started)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_fatal_error_is_printed_once_per_stream(tmp_path):
    ran = subprocess.run([sys.executable, "-m", "tui.cli", "--record", "--no-record", "--no-check",
                          "--set", "model.name=vit_tiyn"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    message = "unknown embedded model 'vit_tiyn' (did you mean 'vit_tiny'?)"
    assert ran.stdout.count(message) == 1, ran.stdout
    assert "fatal error (session): " + message in ran.stdout
    assert "session ended: failed (exit 2)\n" in ran.stdout and "failed (exit code 2)\n" in ran.stdout
    [line] = ran.stderr.strip().splitlines()
    assert line.startswith("gpuscale-tui: error: " + message)


@pytest.mark.slow
@pytest.mark.server
def test_a_failed_start_prints_the_server_logs_tail_once(tmp_path):
    # a start given up at once: a real tritonserver, a real failure. The wait gives up at its second
    # look (0.2 s in), past 10 x 0.01 s, before it asks whether the server is ready (it starts in 0.4 s
    # at best here): a bound of 0.05 s let a start of 0.4 s succeed
    ran = subprocess.run([sys.executable, "-m", "tui.cli", "--record", "--no-record", "--no-check",
                          "--set", "model.name=identity", "--set", "server.startup_timeout_s=0.01"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "fatal error (session): tritonserver not ready after" in ran.stdout
    assert (ran.stdout + ran.stderr).count("--- last lines of the server log ---") == 1, ran.stdout
    [line] = ran.stderr.strip().splitlines()
    assert line.startswith("gpuscale-tui: failed: tritonserver not ready after")
