"""Bad input data on the command line: one line on stderr naming the input and what is wrong,
exit 2, before any load is sent (a missing file before the server even starts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_runner import run_cli, run_cli_inproc
from tests.reliability.test_bad_input import assert_one_line_exit_2


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "study"])
def test_a_missing_data_file_is_one_line_before_anything_starts(tmp_path: Path, command: str):
    missing = tmp_path / "nope.json"
    extra = ["--record", "--no-check"] if command == "run" else ["--headless"]
    # run: refused while parsing, in this process (tests/cli_runner.py); study: the real entry point
    if command == "run":
        proc = run_cli_inproc(command, *extra, "--output", str(tmp_path / "rec"), "--input-data", str(missing),
                              "--set", "model.name=identity")
    else:
        proc = run_cli(command, *extra, "--output", str(tmp_path / "rec"), "--input-data", str(missing),
                       "--set", "model.name=identity", timeout=60)
    assert_one_line_exit_2(proc, f"input data {missing}: no such file or folder")
    assert not (tmp_path / "rec").exists() or not list((tmp_path / "rec").glob("*.sqlite"))


@pytest.mark.slow
@pytest.mark.server
def test_data_that_does_not_fit_the_model_is_one_line_and_no_load(tmp_path: Path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps({"data": [{"INPUT0": [1.0] * 16}, {"INPUT0": {"b64": "not base64!"}}]}))
    proc = run_cli("run", "--record", "--no-check", "--output", str(tmp_path), "--input-data", str(path),
                   "--set", "model.name=identity", "--set", "load.concurrency=1")
    assert_one_line_exit_2(proc, f"input data {path}: data entry 1, input 'INPUT0': bad base64")
    assert "level 1/" not in proc.stdout  # no level started
