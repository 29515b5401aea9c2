"""The embedded server's MPS: when it is used, and the guard's order of starting and ending it.

This machine has no GPU, so no real MPS daemon: the guard's lifecycle test runs a stand-in for
the driver's nvidia-cuda-mps-control (a script that keeps its control pipe and log as the real
one does), to check our side of it: the daemon is up before the server starts, the server gets
the daemon's environment, the daemon is told to quit only after its clients are gone, and no
process is left. The real daemon ran under the real server on the lent 2x H200 boxes
(docs/results/mps_h200.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.server.embedded import _mps_failure
from engine.server.guard import MPS_EXIT, MPS_FAILED, group_members
from engine.server.mps import choose

# A bound on a guard that hangs, not a measure of speed: on a busy box its steps take their time
HANG_S = 300.0

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("setting", "gpus", "control", "use", "why"),
    [
        ("auto", 2, "/usr/bin/nvidia-cuda-mps-control", True, "one MPS daemon for the server's 2 GPUs"),
        ("on", 1, "/usr/bin/nvidia-cuda-mps-control", True, "one MPS daemon for the server's 1 GPU"),
        ("auto", 2, None, False, "nvidia-cuda-mps-control not found"),
        ("auto", 0, "/usr/bin/nvidia-cuda-mps-control", False, "the model runs on the CPU"),
        ("off", 4, "/usr/bin/nvidia-cuda-mps-control", False, "server.mps = 'off'"),
    ],
)
def test_auto_uses_mps_where_the_model_is_on_gpus_and_the_daemon_exists(setting, gpus, control, use, why) -> None:
    choice = choose(setting, gpus, control)
    assert (choice.use, choice.why) == (use, why)


@pytest.mark.parametrize(
    ("setting", "gpus", "control", "message"),
    [
        ("on", 0, "/usr/bin/nvidia-cuda-mps-control", "needs the model on a GPU"),
        ("on", 2, None, "needs nvidia-cuda-mps-control on PATH"),
        ("yes", 2, "/usr/bin/nvidia-cuda-mps-control", "expected one of auto, on, off, found 'yes'"),
    ],
)
def test_mps_on_that_cannot_be_honoured_is_bad_input(setting, gpus, control, message) -> None:
    with pytest.raises(UserError, match=message):
        choose(setting, gpus, control)


def test_the_reason_for_running_without_mps_is_one_line() -> None:
    from_guard = f"tritonserver exited during start-up (log: x)\n--- last lines ---\n[guard] {MPS_FAILED} no pipe in 10 s"
    assert _mps_failure(from_guard) == "the MPS daemon did not start: no pipe in 10 s"
    from_triton = "tritonserver exited during start-up (log: x)\n--- last lines ---\nE1123 failed to load model: MPS\nmore"
    assert _mps_failure(from_triton) == "the server did not start under it (E1123 failed to load model: MPS)"


# A stand-in for nvidia-cuda-mps-control: "-f" is the daemon (control pipe, log, waits for quit);
# without arguments it is the client that sends stdin's commands. "quit" is written where the
# daemon sees it, with whether the server (a process named in $CLIENT_MARK) was still alive.
STAND_IN = r'''#!/usr/bin/env python3
import os, sys, time
pipe, log = os.environ["CUDA_MPS_PIPE_DIRECTORY"], os.environ["CUDA_MPS_LOG_DIRECTORY"]
if sys.argv[1:] == ["-f"]:
    if os.environ.get("STAND_IN_FAIL"):
        open(os.path.join(log, "control.log"), "w").write("cannot start: no GPU\n")
        sys.exit(1)
    open(os.path.join(pipe, "control"), "w").close()
    while not os.path.exists(os.path.join(pipe, "quit")):
        time.sleep(0.02)
    sys.exit(0)
command = sys.stdin.read().strip()
alive = os.path.exists(os.environ["CLIENT_MARK"]) and os.path.exists("/proc/" + open(os.environ["CLIENT_MARK"]).read())
with open(os.path.join(os.environ["QUIT_SEEN"]), "w") as fh:
    fh.write(f"{command} client_alive={alive}")
open(os.path.join(pipe, "quit"), "w").close()
'''

# the "server": records its pid and what it sees of the daemon, then runs until ended
SERVER = (
    "import os, time; open(os.environ['CLIENT_MARK'], 'w').write(str(os.getpid())); "
    "open(os.environ['CLIENT_MARK'] + '.env', 'w').write(os.environ.get('CUDA_MPS_PIPE_DIRECTORY', '') + ' ' + "
    "str(os.path.exists(os.path.join(os.environ.get('CUDA_MPS_PIPE_DIRECTORY', '/none'), 'control')))); time.sleep(60)"
)


def _stand_in(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    control = bin_dir / "nvidia-cuda-mps-control"
    control.write_text(STAND_IN)
    control.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
            "CLIENT_MARK": str(tmp_path / "client"), "QUIT_SEEN": str(tmp_path / "quit_seen")}


def _guard(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.server.guard", "--mps", str(tmp_path / "mps"), "--", sys.executable, "-c", SERVER],
        stdin=read_end, env=env, cwd=str(ROOT), start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    os.close(read_end)
    proc.write_end = write_end  # type: ignore[attr-defined]
    return proc


def _server_saw(mark: Path, guard: subprocess.Popen[bytes]) -> list[str]:
    """What the stand-in server wrote of the daemon (its pipe folder, whether the pipe was up),
    once it has written both: the file exists a moment before its text is in it. The guard gone
    first fails the test with its output."""
    while len(seen := (mark.read_text().split() if mark.exists() else [])) < 2:
        if guard.poll() is not None:
            pytest.fail(f"the guard exited ({guard.returncode}) before its server ran: {_finish(guard)}")
        time.sleep(0.05)
    return seen


def _finish(guard: subprocess.Popen[bytes], timeout: float = HANG_S) -> str:
    """The guard's output once it exited; past ``timeout`` (a hang) its whole group is killed (so a
    failing test leaves nothing running) and the test fails."""
    try:
        return guard.communicate(timeout=timeout)[0].decode()
    except subprocess.TimeoutExpired:
        os.killpg(guard.pid, 9)
        guard.communicate()
        pytest.fail(f"the guard did not exit within {timeout:.0f} s")


@pytest.mark.slow
def test_the_guard_starts_the_daemon_first_and_stops_it_after_the_server(tmp_path: Path) -> None:
    env = _stand_in(tmp_path)
    guard = _guard(tmp_path, env)
    pipe_dir, pipe_up = _server_saw(tmp_path / "client.env", guard)
    assert pipe_dir == str(tmp_path / "mps" / "pipe") and pipe_up == "True"  # the daemon listened before the server ran
    os.close(guard.write_end)  # type: ignore[attr-defined]  # the tool dies: the guard ends everything
    guard.wait(HANG_S)
    assert (tmp_path / "quit_seen").read_text() == "quit client_alive=False"  # told to quit once its client was gone
    assert group_members(guard.pid) == []


@pytest.mark.slow
def test_a_pipe_left_by_an_earlier_daemon_does_not_read_as_this_ones(tmp_path: Path) -> None:
    env = {**_stand_in(tmp_path), "STAND_IN_FAIL": "1"}
    (tmp_path / "mps" / "pipe").mkdir(parents=True)
    (tmp_path / "mps" / "pipe" / "control").touch()  # the server's first start, on ports taken since
    guard = _guard(tmp_path, env)
    out = _finish(guard)
    assert guard.returncode == MPS_EXIT, out
    assert not (tmp_path / "client").exists()


def test_a_daemon_that_does_not_start_keeps_the_server_from_starting_and_says_why(tmp_path: Path) -> None:
    env = {**_stand_in(tmp_path), "STAND_IN_FAIL": "1"}
    guard = _guard(tmp_path, env)
    out = _finish(guard)
    assert guard.returncode == MPS_EXIT
    assert f"{MPS_FAILED} nvidia-cuda-mps-control exited with code 1 (control.log: cannot start: no GPU)" in out
    assert not (tmp_path / "client").exists()  # the server never ran
    assert group_members(guard.pid) == []


def test_the_server_ready_line_says_whether_the_server_runs_under_mps() -> None:
    from engine import events as ev
    from tui.describe import describe

    ready = {"http_url": "http://127.0.0.1:8000", "metrics_url": None, "embedded": True, "model": "m", "config_variant": "2x"}
    assert describe(ev.ServerReady(**ready, mps=True)) == "server ready: embedded m (2x) at http://127.0.0.1:8000, under MPS"
    assert str(describe(ev.ServerReady(**ready, mps=False))).endswith("(2x) at http://127.0.0.1:8000, without MPS")
    assert str(describe(ev.ServerReady(**ready))).endswith("(2x) at http://127.0.0.1:8000")  # remote, CPU, or older


@pytest.mark.parametrize(
    ("authored", "wanted", "gpu_gib", "gpus", "cores", "count"),
    [
        (3, 8, 141.0, 2, 32, 8),  # H200 box of the measurement: 8 per GPU
        (3, 8, 141.0, 4, 64, 8),
        (3, 8, 141.0, 8, 64, 4),  # 64 cores for 8 GPUs: 2 cores per instance
        (3, 8, 16.0, 4, 64, 4),  # a 16 GiB GPU holds 4 in half its memory
        (3, 8, 24.0, 2, 32, 7),
        (3, 8, 8.0, 1, 16, 3),  # never below the config's own count
        (3, 8, None, 1, 16, 3),  # GPU memory unknown: the config's own count
        (3, None, 141.0, 1, 16, 3),  # the config asks for no more under MPS
        (4, 2, 141.0, 1, 16, 4),
    ],
)
def test_instances_under_mps_follow_the_config_within_gpu_memory_and_host_cores(
        authored, wanted, gpu_gib, gpus, cores, count) -> None:
    from engine.server.mps import instances_under_mps

    assert instances_under_mps(authored, wanted, gpu_gib, gpus, cores) == count


def test_the_shipped_vit_configs_ask_for_more_instances_under_mps_and_the_count_is_rewritten(tmp_path: Path) -> None:
    from engine.server.repository import (
        instance_count,
        parameter,
        prepare_repository,
        set_instance_count,
    )

    for variant, gpus in (("1x", 1), ("2x", 2), ("4x", 4)):
        prepared = prepare_repository("openclip_vit_b32", variant, tmp_path / variant, gpu_count=gpus)
        assert instance_count(prepared.config_text) == 3
        assert parameter(prepared.config_text, "mps_instances_per_gpu") == "8"
        more = set_instance_count(prepared, 8)
        written = (tmp_path / variant / "openclip_vit_b32" / "config.pbtxt").read_text()
        assert instance_count(written) == 8 and more.config_text == written
        assert f"gpus: [ {', '.join(map(str, range(gpus)))} ]" in written  # the rest of the group is kept
        assert more.gpus == prepared.gpus
    cpu = prepare_repository("openclip_vit_b32", "cpu", tmp_path / "cpu", gpu_count=0)
    assert parameter(cpu.config_text, "mps_instances_per_gpu") is None
