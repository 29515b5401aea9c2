"""scripts/setup.sh says what it installs and how far it got (pip itself runs quietly), and is
silent when the venv is ready. Run against a stand-in python that records its calls."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$CALLS"
if [ "$1" = "-m" ] && [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi
exit 0
"""


def _setup(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": str(tmp_path / "python"), "CALLS": str(tmp_path / "calls"),
           "PATH": "/usr/bin:/bin"}  # no nvidia-smi: the CPU path
    env.pop("TORCH_INDEX_URL", None)
    return subprocess.run(["bash", "scripts/setup.sh"], cwd=tmp_path / "tree", env=env, capture_output=True,
                          text=True, timeout=600)


def test_setup_says_each_step_then_nothing_once_ready(tmp_path):
    (tmp_path / "tree" / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "pyproject.toml", tmp_path / "tree")
    shutil.copy2(REPO / "scripts" / "setup.sh", tmp_path / "tree" / "scripts")
    (tmp_path / "python").write_text(FAKE_PYTHON)
    (tmp_path / "python").chmod(0o755)
    first = _setup(tmp_path)
    assert first.returncode == 0, first.stderr
    lines = [line for line in first.stderr.splitlines() if line.startswith("setup: ")]
    assert lines[0].startswith("setup: setting up .venv/")
    assert any(line.startswith("setup: creating .venv/") for line in lines)
    steps = [line for line in lines if line.startswith("setup: step ")]
    assert [s[:16] for s in steps] == ["setup: step 1/3:", "setup: step 2/3:", "setup: step 3/3:"]
    assert "torch" in steps[0] and "llama-server" in steps[2]
    assert lines[-1].startswith("setup: done in ") and lines[-1].endswith(".venv/bin/gpuscale-tui")
    calls = (tmp_path / "calls").read_text()
    assert "-e .[all,test]" in calls and "torch==" in calls  # the steps it named are the ones it ran
    again = _setup(tmp_path)
    assert again.returncode == 0 and again.stderr == ""


def test_the_suite_script_says_what_its_time_depends_on_and_how_long_it_took():
    text = (REPO / "scripts" / "test.sh").read_text()
    # a measured time and what it depends on, not a bare promise
    assert "s idle and" in text and "beside two CPU hogs" in text and "the CPU the box leaves it" in text
    assert 'echo "test: pytest took $((SECONDS - started)) s' in text
