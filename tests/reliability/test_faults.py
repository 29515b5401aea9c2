"""Faults with real processes: signals, SIGKILL, the server dying, stalling or restarting, a full disk."""

from __future__ import annotations

import json
import signal
import time

import psutil
import pytest

from engine.record.reader import Recording
from engine.server.embedded import EmbeddedServer
from engine.server.ports import free_port
from tests.reliability.helpers import (
    QUICK,
    family,
    kinds,
    recording_in,
    start_app,
    stop,
    wait_all_gone,
    wait_for_kind,
)

pytestmark = pytest.mark.server
LONG = ["--set", "load.concurrency=1,2,4,8,16", "--set", "load.max_windows=40", "--set", "load.stability_percent=0.001"]


def _has_server(procs: list[psutil.Process]) -> bool:
    return any("tritonserver" in " ".join(p.cmdline()) for p in procs if p.is_running())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["INT", "TERM", "HUP"])
def test_signal_finalizes_the_recording_and_leaves_no_process(tmp_path, sig):
    app = start_app(tmp_path, *QUICK, *LONG)
    rec = recording_in(tmp_path)
    wait_for_kind(rec, "window", count=2)
    procs = family(app.pid)
    assert _has_server(procs)
    code, out = stop(app, sig)
    assert code == 130, out
    assert kinds(rec)[-1] == "session_ended"
    with Recording.open(rec) as recording:
        ended = [e for e in recording.events(("session_ended",))][-1]
    assert ended.status == "interrupted"
    assert wait_all_gone(procs) == [], "load workers or the server outlived the app"
    assert "recording:" in out


# SIGKILL of the app (no orphans, the recording keeps all but the last second): with the copy
# taken without its -wal file in test_signals_and_kills.py, one run of the app for both


# the app's embedded server SIGKILLed mid-level (counted errors, the death named, nothing left):
# test_signals_and_kills.py, with request and wait timeouts long enough to show it is named at once


def _kill_triton(server: EmbeddedServer) -> None:
    """SIGKILL the server's tritonserver (its guard and stubs then leave at once)."""
    if server.pid is None:  # stopped already (psutil.Process(None) would be this process)
        return
    try:
        for p in psutil.Process(server.pid).children(recursive=True):
            if p.name() == "tritonserver":
                p.kill()
    except psutil.NoSuchProcess:
        pass


def _remote_profile(tmp_path, url: str) -> str:
    path = tmp_path / "remote.toml"
    path.write_text(f'[server]\nkind = "remote"\nurl = "{url}"\n[model]\nname = "identity"\n')
    return str(path)


def test_remote_server_restarted_mid_sweep_the_engine_recovers(tmp_path):
    port = free_port()
    server = EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path / "s1", http_port=port).start()
    out_dir = tmp_path / "rec"
    app = start_app(out_dir, "--profile", _remote_profile(tmp_path, server.http_url), *QUICK[2:],
                    "--set", "load.concurrency=2,2", "--set", "load.max_windows=10", "--set", "load.window_ms=500",
                    "--set", "load.stability_percent=0.001", "--set", "load.request_timeout_s=5")
    try:
        rec = recording_in(out_dir)
        wait_for_kind(rec, "window", count=2)
        # the outage: connections refused, then reset. Under load Triton drains until the guard
        # kills it, after its 10 s grace by default: a 1 s grace is the same outage, sooner, and
        # the first level (10 windows of at least 0.5 s) is still running when it starts
        server.stop(timeout=1.0)
        time.sleep(1.0)
        server = EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path / "s2", http_port=port).start()
        back_at = time.time()
        out, _ = app.communicate(timeout=180)
    finally:
        _kill_triton(server)  # its graceful stop (seconds of draining) is not what the test is about
        server.stop()
        if app.poll() is None:
            app.kill()
    with Recording.open(rec) as recording:
        windows = list(recording.events(("window",)))
        levels = list(recording.events(("level_result",)))
    assert len(levels) == 2, out
    outage = [w for w in windows if w.errors]
    assert outage, "the outage must show as counted errors"
    assert sum(level.errors for level in levels) == sum(w.errors for w in windows if not w.warmup)
    assert set().union(*(w.errors_by_kind for w in outage)) <= {"connection_refused", "connection_reset", "timeout",
                                                                 "bad_response"}
    after = [w for w in windows if w.t_start > back_at + 1.0]
    assert after and all(w.requests > 0 for w in after), "the engine did not recover once the server was back"
    assert levels[-1].requests > 0


def test_remote_server_that_stops_answering_counts_timeouts_and_does_not_hang(tmp_path):
    server = EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path / "s").start()
    out_dir = tmp_path / "rec"
    app = start_app(out_dir, "--profile", _remote_profile(tmp_path, server.http_url), *QUICK[2:],
                    "--set", "load.concurrency=2,4", "--set", "load.max_windows=6", "--set", "load.window_ms=500",
                    "--set", "load.stability_percent=0.001", "--set", "load.request_timeout_s=1",
                    "--set", "load.server_wait_s=2")
    frozen: list[psutil.Process] = []
    try:
        rec = recording_in(out_dir)
        wait_for_kind(rec, "window", count=2)
        guard = psutil.Process(server.pid)
        frozen = [p for p in guard.children(recursive=True)]
        for p in frozen:
            p.suspend()  # alive, connections open, no answers
        out, _ = app.communicate(timeout=120)
    finally:
        # a thawed Triton drains for the guard's whole grace (10 s) before it is killed; this
        # server's graceful stop is not what the test is about: it is killed frozen
        _kill_triton(server)
        for p in frozen:
            try:
                p.resume()
            except psutil.NoSuchProcess:
                pass
        server.stop(timeout=2.0)
        if app.poll() is None:
            app.kill()
    assert app.returncode == 1, out
    with Recording.open(rec) as recording:
        levels = list(recording.events(("level_result",)))
        errors = [e.message for e in recording.events(("error",))]
    assert levels and levels[-1].status == "failed"
    assert levels[-1].errors_by_kind.get("timeout", 0) > 0
    # the wait for a hung server ends at load.server_wait_s (not at the 30 s control-call timeout)
    assert "server not ready within 2 s: the sweep stops" in errors, errors


def test_disk_full_while_recording_is_a_clear_error_and_the_file_stays_readable(identity_server, tmp_path):
    # RLIMIT_FSIZE makes writes past the limit fail (EFBIG) as a full disk would (ENOSPC)
    limit = 96 * 1024
    code = (
        "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
        "from tui.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    import subprocess
    import sys

    from tests.reliability.helpers import ROOT

    out_dir = tmp_path / "rec"
    # a remote server (the session's, tests/conftest.py), so that only the recording is written
    # under the limit
    proc = subprocess.run(
        [sys.executable, "-c", code, "--record", "--output", str(out_dir),
         "--profile", _remote_profile(tmp_path, identity_server.http_url), *QUICK[2:], *LONG[:2],
         "--set", "load.max_windows=60", "--set", "load.stability_percent=0.001"],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert "Traceback" not in text
    assert "recording" in text.lower() and ("full" in text.lower() or "too large" in text.lower()
                                            or "no space" in text.lower())
    (rec,) = out_dir.glob("*.sqlite")
    with Recording.open(rec) as recording:
        events = list(recording.events())
    assert events and events[0].kind == "session_started"
    json.dumps([e.to_dict() for e in events])
