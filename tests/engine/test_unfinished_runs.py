"""A run that did not do all it was asked exits 1 and says what: a wire check skipped on a remote
server without the `wire` model, failed levels counted against the planned ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_runner import run_cli
from tests.reliability.hostile_server import HostileTriton, Reply, remote_profile


@pytest.mark.slow
def test_wire_check_skipped_on_a_remote_server_is_not_ok(tmp_path):
    with HostileTriton() as srv:  # no `wire` model on it
        profile = remote_profile(tmp_path / "p.toml", srv.where)
        proc = run_cli("--record", "--output", str(tmp_path), "--profile", profile, "--wire")
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr)
    assert "failed: wire check skipped: model 'wire' is not available" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_failed_levels_are_counted_against_the_planned_ones(tmp_path):
    with HostileTriton(infer=Reply(500, {"error": "no"})) as srv:
        profile = remote_profile(tmp_path / "p.toml", srv.where, levels="[1, 2, 4]")
        text = Path(profile).read_text().replace("[load]\n", '[load]\non_level_failure = "stop"\n')
        Path(profile).write_text(text)
        proc = run_cli("--record", "--output", str(tmp_path), "--profile", profile)
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr)
    assert "1 of 3 levels failed (2 not run; level 1: HTTP 500: no)" in proc.stderr, proc.stderr
