"""A cpu*2 run whose second tritonserver aborts mid-sweep (SIGABRT, the end of an uncaught
boost::interprocess::lock_exception): named in one line, its levels degraded, the run failed
(exit 1), no decision, and no hang."""

from __future__ import annotations

import signal

import psutil
import pytest

from engine.events import LevelResult
from engine.record.reader import Recording
from tests.reliability.helpers import recording_in, start_app, wait_for_kind

pytestmark = [pytest.mark.server, pytest.mark.slow, pytest.mark.xdist_group("cpu_study")]  # tests/conftest.py


def test_a_fleet_server_that_aborts_is_named_and_fails_the_run(tmp_path):
    out = tmp_path / "rec"
    sets = ["model.name=identity", "model.variant=cpu*2", "load.concurrency=4,8", "load.window_ms=500",
            "load.warmup_s=0.5", "load.min_window_requests=20", "load.max_windows=6", "load.stability_percent=0.001",
            "load.request_timeout_s=2", "load.max_trials=1", "load.contended_percent=100"]
    app = start_app(out, "--no-check", *[x for kv in sets for x in ("--set", kv)])
    try:
        rec = recording_in(out)
        wait_for_kind(rec, "window", count=2)
        tritons = [p for p in psutil.Process(app.pid).children(recursive=True) if p.name() == "tritonserver"]
        assert len(tritons) == 2
        aborted = tritons[-1]
        port = next(a for a in aborted.cmdline() if a.startswith("--http-port=")).split("=", 1)[1]
        aborted.send_signal(signal.SIGABRT)
        output, _ = app.communicate(timeout=300)  # the run's own end, not ours
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
    assert app.returncode == 1, output[-3000:]
    with Recording.open(rec) as recording:
        levels = [e for e in recording.events() if isinstance(e, LevelResult)]
        warnings = [e.message for e in recording.events(("warning",))]
        status = recording.summary().status
    named = [w for w in warnings if f":{port}) exited (tritonserver killed by SIGABRT (signal 6))" in w]
    assert len(named) == 1 and named[0].startswith("server "), warnings
    assert "\n" not in named[0]
    assert levels and all(lv.status != "stable" for lv in levels)
    assert any(ep.failed for lv in levels for ep in lv.endpoints)
    assert status == "failed"
    assert "no sound level" in output or "not decided" in output, output[-3000:]
