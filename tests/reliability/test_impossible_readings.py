"""A hostile statistics or /metrics endpoint (tests/reliability/hostile_server.py): values that are
not finite, not numbers, negative or impossible are dropped and counted, said once as a warning,
never recorded, and never end the run."""

from __future__ import annotations

import itertools
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.analysis import sane_values
from engine.record.reader import Recording
from engine.triton.server_stats import breakdown, snapshot_from_json
from tests.reliability.hostile_server import (
    HostileTriton,
    Reply,
    metrics_text,
    remote_profile,
    stats_doc,
)

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, srv: HostileTriton) -> tuple[subprocess.CompletedProcess[str], Path]:
    profile = remote_profile(tmp_path / "hostile.toml", srv.where)
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "--record", "--output", str(tmp_path), "--profile", profile],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    recordings = sorted(tmp_path.glob("*.sqlite"))
    assert recordings, proc.stdout + proc.stderr
    return proc, recordings[0]


def _assert_ran(proc: subprocess.CompletedProcess[str], warning: str) -> None:
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert "Traceback" not in text and "never retrieved" not in text, text[-3000:]
    assert proc.stdout.count(warning) == 1, proc.stdout[-3000:]  # said once


@pytest.mark.slow
def test_gauges_of_1e300_and_infinity_are_dropped_not_recorded(tmp_path):
    srv = HostileTriton(metrics=Reply(200, metrics_text(mem_used="1e300", power="+Inf", util="-3", energy="NaN"),
                                      "text/plain"))
    with srv:
        proc, path = _run(tmp_path, srv)
    _assert_ran(proc, "hold impossible values")
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT util, power, mem_used, mem_total FROM gpu_samples").fetchall()
    assert rows and all(r[:3] == (None, None, None) and r[3] == 80_000_000_000 for r in rows), rows[:3]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["infinity", "list", "string", "negative"])
def test_statistics_counters_that_are_not_counters_are_dropped(case, tmp_path):
    bad = {"infinity": "Infinity", "list": "[1, 2]", "string": '"12"', "negative": "-5"}[case]
    body = ('{"model_stats": [{"name": "m", "version": "1", "inference_count": 1, "execution_count": 1, '
            f'"inference_stats": {{"success": {{"count": 1, "ns": 5}}, "queue": {{"count": {bad}, "ns": 1}}}}}}]}}')
    with HostileTriton(stats=Reply(200, body)) as srv:
        proc, path = _run(tmp_path, srv)
    _assert_ran(proc, "the server's statistics hold impossible values")
    with Recording.open(path) as rec:
        windows = [e for e in rec.events(("window",)) if e.server is not None]
    assert windows and all("queue.count" in w.server.dropped and w.server.queue is None for w in windows)


@pytest.mark.slow
def test_random_statistics_never_show_a_negative_or_impossible_time(tmp_path):
    """Counters that grow, but whose nanoseconds jump about: no time below zero or above the
    client's own latency reaches a window."""
    steps = itertools.count(1)

    def junk(_seen: object) -> Reply:
        n = next(steps)
        return Reply(200, stats_doc(n * 10, (-1) ** n * 10**15 + 10**16, queue=(n * 10, (n % 3) * 10**17)))

    with HostileTriton(stats=junk) as srv:
        proc, path = _run(tmp_path, srv)
    _assert_ran(proc, "the server's statistics hold impossible values")
    with Recording.open(path) as rec:
        windows = [e for e in rec.events(("window",)) if e.server is not None]
    assert windows
    for w in windows:
        for part in ("queue", "compute_infer", "server_total"):
            value = getattr(w.server, part)
            assert value is None or 0 <= value <= w.latency.mean * 1.1 + 1e-3, (part, value, w.latency.mean)


# --------------------------------------------------------------------------- the pure checks


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1, 2.5, "12", [1], None, True, 2**70])
def test_a_counter_that_cannot_be_one_is_none(value):
    assert sane_values.counter(value) is None


def test_counters_and_gauges_that_can_be_are_kept():
    assert sane_values.counter(12) == 12 and sane_values.counter(12.0) == 12
    assert sane_values.gauge("util_gpu", 100.4) == 100.0 and sane_values.gauge("mem_used", 8e10) == 8e10
    assert sane_values.gauge("mem_used", 1e300) is None and sane_values.gauge("power_w", -1) is None


def test_a_snapshot_names_what_it_dropped_and_the_breakdown_leaves_it_out():
    good = snapshot_from_json(stats_doc(10, 10_000_000), "m")
    bad = snapshot_from_json({"model_stats": [{"name": "m", "inference_count": float("inf"), "execution_count": 20,
                                               "inference_stats": {"success": {"count": 20, "ns": 20_000_000},
                                                                   "queue": {"count": "x", "ns": []}}}]}, "m")
    assert bad is not None and bad.dropped == ("inference_count", "queue.count", "queue.ns")
    result = breakdown(good, bad, client_mean_s=0.01)
    assert result is not None and result.queue is None and result.avg_batch_size is None
    assert result.server_total == pytest.approx(0.001) and result.request_count == 10
    assert result.dropped == ["inference_count", "queue.count", "queue.ns"]


def test_server_time_above_the_clients_or_below_zero_is_dropped():
    before = snapshot_from_json(stats_doc(10, 10**12, queue=(10, 10**12)), "m")
    after = snapshot_from_json(stats_doc(20, 2 * 10**12, queue=(20, 0)), "m")
    result = breakdown(before, after, client_mean_s=0.05)
    assert result is not None and result.queue is None and result.server_total is None
    assert result.dropped[0] == "success time" and "queue time" in result.dropped


def test_the_recorder_keeps_going_past_an_integer_sqlite_cannot_hold(tmp_path):
    """A second line behind the sanitiser: a reading too large for SQLite is NULL, not the end."""
    from engine.events import GpuReading, GpuSample, Warning
    from engine.record.recorder import Recorder

    path = tmp_path / "r.sqlite"
    recorder = Recorder(path)
    recorder(GpuSample(gpus=[GpuReading(uuid="GPU-x", index=0, source="triton", mem_used=10**30, mem_total=8 * 2**30)], source="triton",
                       interval_s=2.0))
    recorder(Warning(source="t", message="after"))
    recorder.close()
    assert recorder.error is None, recorder.error
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT mem_used, mem_total FROM gpu_samples").fetchall() == [(None, 8 * 2**30)]


def test_a_read_that_gave_nothing_near_its_timeout_gave_up():
    assert sane_values.gave_up(1.95, 2.0) and sane_values.gave_up(1.8, 2.0)
    assert not sane_values.gave_up(0.01, 2.0)  # a server without the counters answers None at once
    assert not sane_values.gave_up(1.7, 2.0)
