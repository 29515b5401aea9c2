"""The smaller ones: signals during export and `server`, a --wire that was skipped, a rate too slow
to measure, gates and profiles that are not what they claim, the failed-levels count, a key named
like a secret, and --out onto an existing file."""

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
from tests.reliability.hostile_server import HostileTriton, Reply, remote_profile
from tests.reliability.test_bad_input import assert_one_line_exit_2, run_cli

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


@pytest.mark.slow
def test_wire_check_skipped_on_a_remote_server_is_not_ok(tmp_path):
    with HostileTriton() as srv:  # no `wire` model on it
        profile = remote_profile(tmp_path / "p.toml", srv.where)
        proc = run_cli("--record", "--output", str(tmp_path), "--profile", profile, "--wire")
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr)
    assert "failed: wire check skipped: model 'wire' is not available" in proc.stderr, proc.stderr


def test_a_rate_too_slow_for_one_request_per_window_is_refused(tmp_path):
    proc = run_cli("--record", "--output", str(tmp_path), "--set", "load.mode=rate", "--set", "load.rates=0.0001")
    assert_one_line_exit_2(proc, "load.rates: expected rates of at least")
    assert "found 0.0001/s" in proc.stderr


def test_a_p99_gate_whose_level_is_not_a_number_fails_the_profile_check(tmp_path):
    profile = tmp_path / "gates.toml"
    profile.write_text('[gates]\nmax_p99_ms = { "abc" = 5 }\n')
    assert_one_line_exit_2(run_cli("profiles", "--check", str(profile)), "gates.max_p99_ms: expected a table of level")


@pytest.mark.slow
def test_failed_levels_are_counted_against_the_planned_ones(tmp_path):
    with HostileTriton(infer=Reply(500, {"error": "no"})) as srv:
        profile = remote_profile(tmp_path / "p.toml", srv.where, levels="[1, 2, 4]")
        text = Path(profile).read_text().replace("[load]\n", '[load]\non_level_failure = "stop"\n')
        Path(profile).write_text(text)
        proc = run_cli("--record", "--output", str(tmp_path), "--profile", profile)
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr)
    assert "1 of 3 levels failed (2 not run)" in proc.stderr, proc.stderr


def test_a_key_named_like_a_secret_keeps_its_unknown_key_message(tmp_path):
    profile = tmp_path / "p.toml"
    profile.write_text('[server]\npassword = "hunter2hunter2"\n')
    proc = run_cli("profiles", "--check", str(profile))
    assert_one_line_exit_2(proc, "server.password: unknown key")
    assert "hunter2hunter2" not in proc.stderr


def test_compare_out_onto_an_existing_file_is_refused(tmp_path):
    run = SyntheticRun(levels=[1, 4], windows_per_level=2, gpu_count=1, variant="1x", probe=False)
    rec = record_events(tmp_path / "r.sqlite", synthetic_session(run))
    existing = tmp_path / "passwd"
    existing.write_text("root:x:0:0\n")
    proc = run_cli("compare", str(rec), str(rec), "--out", str(existing))
    assert_one_line_exit_2(proc, "already exists")
    assert existing.read_text() == "root:x:0:0\n" and not (tmp_path / "passwd.txt").exists()
    folder = tmp_path / "reports"
    folder.mkdir()
    assert_one_line_exit_2(run_cli("compare", str(rec), str(rec), "--out", str(folder)), "a folder")


def test_a_folder_given_as_a_profile_is_called_a_folder(tmp_path):
    assert_one_line_exit_2(run_cli("profiles", "--check", str(tmp_path)), "is a folder, not a profile file")
