"""A core install (no [server] extra) running the default job: the line naming the extra comes
first, before the box check, and the run exits 2 (issue 54, item 12). The extra is hidden from a
subprocess of this venv (a sitecustomize), not uninstalled: tests/test_core_install.py builds the
real core venv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTRA_LINE = "the embedded server needs nvidia-pytriton: pip install 'gpuscale-tui[server]'"


@pytest.mark.parametrize("args", [[], ["study"]])  # the default job, and the study (each config a session)
def test_the_default_job_without_the_server_extra_says_so_before_the_box_check(tmp_path: Path, args: list[str]) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    # find_spec answers None for a module set to None in sys.modules: missing_extra sees it missing
    (hide / "sitecustomize.py").write_text('import sys\nsys.modules["pytriton"] = None\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hide), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "tui.cli", *args, "--headless"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    if args:  # the study says it before its plan, alone, on stderr
        assert lines == [], proc.stdout[-2000:]
    else:  # the session's log: the line first
        assert lines and lines[0].endswith(f"fatal error (session): {EXTRA_LINE}"), proc.stdout[-2000:]
    assert "box check" not in proc.stdout and "starting server" not in proc.stdout
    assert proc.stderr.strip().splitlines() == [f"gpuscale-tui: error: {EXTRA_LINE}"]
    assert not list(tmp_path.glob("recordings/*"))  # nothing measured, nothing recorded
