"""Faults with real processes: signals sent to the whole process group (as a terminal, an SSH
drop or `timeout` sends them), a second Ctrl-C, a load worker or the server's guard killed, a
crash whose copy lost its -wal file. A run that did not finish all its levels never exits 0 nor
records "ok"."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from engine.record.reader import Recording
from engine.record.recorder import CHECKPOINT_INTERVAL_S
from engine.shm_segments import remove_segments
from tests.reliability.helpers import (
    QUICK,
    ROOT,
    family,
    recording_in,
    start_app,
    wait_all_gone,
    wait_for_kind,
)

pytestmark = pytest.mark.server
LONG = ["--set", "load.concurrency=1,2,4,8,16", "--set", "load.max_windows=40", "--set", "load.stability_percent=0.001"]


def _named(procs: list[psutil.Process], needle: str) -> list[psutil.Process]:
    found = []
    for p in procs:
        try:
            if needle in " ".join(p.cmdline()):
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


def _scratch_dir(procs: list[psutil.Process]) -> Path:
    """The embedded server's scratch folder (/tmp/gpuscale-triton-*), from its command line."""
    for p in _named(procs, "--model-repository="):
        for arg in p.cmdline():
            if arg.startswith("--model-repository="):
                return Path(arg.partition("=")[2]).parent
    raise AssertionError("no tritonserver among the app's processes")


def _region_prefix(guard: psutil.Process) -> str:
    """The server's Python-backend region prefix, from its guard's command line."""
    args = guard.cmdline()
    return args[args.index("--server-shm-prefix") + 1]


def _wait_checkpointed(rec: Path, scratch: Path, windows: int) -> None:
    """Until a copy of ``rec``'s main file alone (no -wal) holds ``windows`` windows: a checkpoint
    has folded them in. A copy taken mid-checkpoint may not open: it is taken again."""
    deadline = time.monotonic() + 10 * CHECKPOINT_INTERVAL_S + 60.0  # a bound on a hang, not a speed
    for attempt in itertools.count():
        if time.monotonic() > deadline:
            break
        copy = scratch / str(attempt) / rec.name  # a folder each: no -wal a reader left beside an earlier copy
        copy.parent.mkdir(parents=True)
        shutil.copy(rec, copy)
        try:
            with Recording.open(copy) as recording:
                if recording.event_counts().get("window", 0) >= windows:
                    return
        except Exception:  # nothing checkpointed yet, or a torn copy
            pass
        time.sleep(0.2)
    raise AssertionError(f"no checkpoint of {rec} held {windows} windows")


def _ended(path: Path):
    with Recording.open(path) as recording:
        events = list(recording.events())
    ended = [e for e in events if e.kind == "session_ended"]
    return events, (ended[-1] if ended else None)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_signal_to_the_process_group_keeps_the_level_as_interrupted(tmp_path, sig):
    app = start_app(tmp_path, *QUICK, *LONG)  # its own process group, load workers in it
    rec = recording_in(tmp_path)
    wait_for_kind(rec, "window", count=2)
    procs = family(app.pid)
    assert _named(procs, "engine.load.worker")
    os.killpg(app.pid, sig)
    out, _ = app.communicate(timeout=90)
    assert app.returncode == 130, out
    events, ended = _ended(rec)
    assert ended is not None and ended.status == "interrupted", out
    fatal = [e.message for e in events if e.kind == "error" and e.fatal]
    assert not fatal, f"the load workers died of the signal: {fatal}"
    levels = [e for e in events if e.kind == "level_result"]
    assert levels and levels[-1].status == "interrupted", "the level in progress was dropped"
    assert wait_all_gone(procs) == []


def test_second_ctrl_c_ends_interrupted_with_the_recording_finished_and_nothing_left(tmp_path):
    app = start_app(tmp_path, *QUICK, *LONG)
    rec = recording_in(tmp_path)
    wait_for_kind(rec, "window", count=2)
    procs = family(app.pid)
    scratch = _scratch_dir(procs)
    os.killpg(app.pid, signal.SIGINT)
    time.sleep(0.5)
    os.killpg(app.pid, signal.SIGINT)  # the impatient second Ctrl-C
    out, _ = app.communicate(timeout=90)
    assert app.returncode == 130, out
    assert "done" not in out.splitlines(), out
    events, ended = _ended(rec)
    assert ended is not None and ended.status == "interrupted" and ended.exit_code == 130
    assert [e for e in events if e.kind == "level_result"], "no level result recorded"
    # by the time the tool has exited, its server and workers are gone too (not seconds later)
    assert wait_all_gone(procs, timeout=3) == [], "guard, tritonserver or a worker outlived the tool"
    assert not scratch.exists()


def test_load_worker_killed_fails_the_run(tmp_path):
    app = start_app(tmp_path, *QUICK, *LONG)
    rec = recording_in(tmp_path)
    wait_for_kind(rec, "window", count=2)
    procs = family(app.pid)
    (worker, *_) = _named(procs, "engine.load.worker")
    os.kill(worker.pid, signal.SIGKILL)
    out, _ = app.communicate(timeout=90)
    assert app.returncode == 1, out
    assert "done" not in out.splitlines() and "session ended: ok" not in out, out
    _events, ended = _ended(rec)
    assert ended is not None and ended.status == "failed" and ended.exit_code == 1
    assert "load worker" in (ended.error or "")
    assert wait_all_gone(procs) == []


def test_guard_killed_first_then_the_tool_leaves_no_server(tmp_path):
    app = start_app(tmp_path, *QUICK, *LONG)
    rec = recording_in(tmp_path)
    wait_for_kind(rec, "window", count=2)
    procs = family(app.pid)
    (guard,) = _named(procs, "engine.server.guard")
    assert _named(procs, "tritonserver")
    scratch, regions = _scratch_dir(procs), _region_prefix(guard)
    os.kill(guard.pid, signal.SIGKILL)
    os.kill(app.pid, signal.SIGKILL)
    app.communicate(timeout=30)
    left = wait_all_gone(procs, timeout=20)
    assert left == [], f"outlived the tool and its guard: {[p.cmdline()[:1] for p in left]}"
    # with both killed nobody is left to clean up: the test removes what it orphaned on purpose
    shutil.rmtree(scratch, ignore_errors=True)
    remove_segments(regions)


def test_embedded_server_killed_is_named_at_once_and_fails_the_level_with_counted_errors(tmp_path):
    # long request timeouts and server wait: without naming the death the sweep would sit them out;
    # four connections in flight when it dies
    app = start_app(tmp_path, *QUICK, *LONG, "--set", "load.concurrency=4,8", "--set", "load.request_timeout_s=60",
                    "--set", "load.server_wait_s=60")
    rec = recording_in(tmp_path)
    wait_for_kind(rec, "window", count=3)
    procs = family(app.pid)
    (server,) = [p for p in _named(procs, "tritonserver") if p.cmdline()[0].endswith("tritonserver")]
    os.kill(server.pid, signal.SIGKILL)
    out, _ = app.communicate(timeout=50)
    assert app.returncode == 1, out
    assert "killed by SIGKILL" in out, out
    events, ended = _ended(rec)
    named = [e for e in events if e.kind == "error" and e.source == "server" and e.fatal]
    assert named and "exited" in named[0].message and "SIGKILL" in named[0].message
    messages = [e.message for e in events if e.kind in ("warning", "error")]
    assert any("embedded Triton server exited" in m and "SIGKILL" in m for m in messages), messages
    levels = [e for e in events if e.kind == "level_result"]
    assert levels, "the level in progress must still be reported"
    first = levels[0]
    assert first.errors > 0 and sum(first.errors_by_kind.values()) == first.errors
    assert set(first.errors_by_kind) & {"connection_refused", "connection_reset", "bad_response", "timeout"}
    assert levels[-1].status == "failed"
    assert "server exited" in levels[-1].error_messages[0]
    assert ended is not None and ended.status == "failed" and "SIGKILL" in (ended.error or "")
    assert wait_all_gone(procs) == []


def test_sigkill_keeps_all_but_the_last_seconds_also_in_a_copy_without_its_wal(tmp_path):
    """SIGKILL of the tool: no process and no scratch folder left; the recording opens without
    repair and keeps everything but the last second; a copy taken without its -wal file keeps
    all but the last checkpoint interval and says why. (One run of the app for both files.)"""
    out_dir = tmp_path / "rec"
    app = start_app(out_dir, *QUICK, *LONG)
    rec = recording_in(out_dir)
    wait_for_kind(rec, "window", count=4)
    procs = family(app.pid)
    scratch = _scratch_dir(procs)
    with Recording.open(rec) as recording:
        windows_before = recording.event_counts().get("window", 0)
    _wait_checkpointed(rec, tmp_path / "probe", windows_before)  # at least one checkpoint after those windows
    killed_at = time.time()
    os.kill(app.pid, signal.SIGKILL)
    app.communicate(timeout=30)
    assert wait_all_gone(procs) == [], "SIGKILL of the app left processes behind"
    assert not scratch.exists(), "the server's scratch folder outlived a SIGKILL of the tool"
    copy = tmp_path / "copy" / rec.name  # what `cp recording.sqlite elsewhere/` takes
    copy.parent.mkdir()
    shutil.copy(rec, copy)  # before the original is opened: opening it folds its -wal file in

    with Recording.open(rec) as recording:  # opens without repair
        events = list(recording.events())
    assert events[0].kind == "session_started"
    assert "session_ended" not in [e.kind for e in events]
    last = max(e.ts for e in events)
    assert killed_at - last < 2.0, f"lost {killed_at - last:.1f} s of events"

    with Recording.open(copy) as recording:
        windows = recording.event_counts().get("window", 0)
        notes = recording.notes
    assert windows >= windows_before > 0
    assert any("-wal file next to it" in n for n in notes), notes
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "export", str(copy), "-f", "json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "-wal file next to it" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- the TUI in a terminal


def _tui(tmux, out_dir: Path) -> int:
    from tests.tui.test_tmux_e2e import app_command

    pid = tmux.start(app_command(out_dir, "--no-check", "--set", "load.concurrency=1,2,4,8,16", "--set", "load.max_windows=40",
                                 "--set", "load.stability_percent=0.001", "--set", "load.workers=1"), 120, 40)
    tmux.wait_for(r"level 1/5", timeout=180)
    return pid


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_tui_hang_up_keeps_the_level_and_ends_interrupted(tmp_path):
    from tests.tui.test_tmux_e2e import Tmux

    tmux = Tmux()
    try:
        pid = _tui(tmux, tmp_path)
        procs = family(pid)
        assert procs[1:], "the app should have started the embedded server and its load workers"
        rec = recording_in(tmp_path)
        wait_for_kind(rec, "window", count=2)
        tmux.kill()  # SIGHUP to the terminal's foreground process group, as when an SSH connection drops
        assert wait_all_gone(procs[:1], timeout=90) == [], "the app did not exit after SIGHUP"
        assert wait_all_gone(procs, timeout=20) == [], "child processes outlived the app"
    finally:
        tmux.kill()
    events, ended = _ended(rec)
    assert [e.kind for e in events].count("session_ended") == 1
    assert ended is not None and ended.status == "interrupted" and ended.exit_code == 130
    assert not [e.message for e in events if e.kind == "error" and e.fatal]
    levels = [e for e in events if e.kind == "level_result"]
    assert levels and levels[-1].status == "interrupted"
    assert len(levels) < 5  # it was stopped mid-sweep, not run to the end


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_tui_hang_up_after_a_load_worker_died_records_failed(tmp_path):
    from tests.tui.test_tmux_e2e import Tmux

    tmux = Tmux()
    try:
        pid = _tui(tmux, tmp_path)
        procs = family(pid)
        rec = recording_in(tmp_path)
        wait_for_kind(rec, "window", count=2)
        (worker, *_) = _named(procs, "engine.load.worker")
        os.kill(worker.pid, signal.SIGKILL)
        wait_for_kind(rec, "sweep_finished")
        tmux.kill()
        assert wait_all_gone(procs, timeout=90) == []
    finally:
        tmux.kill()
    _events, ended = _ended(rec)
    assert ended is not None and ended.status == "failed" and ended.exit_code == 1
    assert "load worker" in (ended.error or "")
