"""A bad workload spec on the command line is one line and exit 2, before any server is asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_runner import run_cli_inproc

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("setting", "words"), [
    ("load.input_tokens=lognormal:abc", "'lognormal:128:0.5' (median:sigma) or 'empirical:FILE' (length,count lines), found 'lognormal:abc'"),
    ("load.output_tokens=normal:10:50", "found 'normal:10:50'"),
    ("load.prefix_groups=4", "load.prefix_groups and load.prefix_tokens both set"),
    ("load.distinct_prompts=0", "load.distinct_prompts"),
    ("load.burstiness=0.5", "expected load.arrival = 'gamma' for a burstiness"),
])
def test_a_bad_workload_spec_is_one_line_and_exit_2(setting: str, words: str) -> None:
    # port 9 (discard) on loopback: nothing answers there, and a valid spec would say so instead.
    # In this process (tests/cli_runner.py): it also fails if the command starts a thread, a
    # process or the TUI; the histogram case below runs the real entry point in a subprocess.
    proc = run_cli_inproc("--url", "http://127.0.0.1:9/v1", "--no-check", "--no-record", "--headless",
                          "--set", setting)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in proc.stderr, proc.stderr


def test_a_bad_histogram_file_is_one_line_naming_its_line(tmp_path: Path) -> None:
    hist = tmp_path / "lengths.csv"
    hist.write_text("128,10\nabc,2\n")
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "--url", "http://127.0.0.1:9/v1", "--no-check",
                           "--no-record", "--headless", "--set", f"load.input_tokens=empirical:{hist}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "line 2 is 'abc,2'" in lines[0], proc.stderr
