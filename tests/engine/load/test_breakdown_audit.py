"""Server-side breakdown from statistics deltas, and the client's self-audit (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.load.audit import client_audit
from engine.load.windows import Aggregate
from engine.triton.server_stats import StatsSnapshot, breakdown, snapshot_from_json, taken_in_time


def _stats(version, success, queue, cin, cinf, cout, inferences, executions, name="m"):
    def item(count_ns):
        return {"count": count_ns[0], "ns": count_ns[1]}

    return {
        "name": name, "version": version, "inference_count": inferences, "execution_count": executions,
        "inference_stats": {
            "success": item(success), "fail": item((0, 0)), "queue": item(queue),
            "compute_input": item(cin), "compute_infer": item(cinf), "compute_output": item(cout),
        },
    }


def test_snapshot_sums_versions_or_picks_one():
    doc = {"model_stats": [
        _stats("1", (10, 1000), (10, 100), (10, 10), (10, 500), (10, 20), 10, 5),
        _stats("2", (5, 500), (5, 50), (5, 5), (5, 250), (5, 10), 5, 5),
        _stats("1", (99, 9), (99, 9), (99, 9), (99, 9), (99, 9), 99, 99, name="other"),
    ]}
    both = snapshot_from_json(doc, "m")
    assert both.counts["success"] == 15 and both.ns["success"] == 1500
    assert both.inference_count == 15 and both.execution_count == 10
    one = snapshot_from_json(doc, "m", "2")
    assert one.counts["queue"] == 5 and one.ns["compute_infer"] == 250
    assert snapshot_from_json(doc, "missing") is None
    assert snapshot_from_json({"error": "x"}, "m") is None


def test_breakdown_is_per_request_over_the_interval():
    before = snapshot_from_json({"model_stats": [_stats("1", (100, 10**8), (100, 10**7), (100, 10**6), (100, 5 * 10**7), (100, 2 * 10**6), 100, 50)]}, "m")
    # 400 more requests: success +400 ms total (1 ms each), queue +200 ms (0.5 ms), input +40 ms,
    # infer +120 ms, output +20 ms; 400 inferences in 100 executions -> batch 4
    after = snapshot_from_json({"model_stats": [_stats("1", (500, 5 * 10**8), (500, 21 * 10**7), (500, 41 * 10**6), (500, 17 * 10**7), (500, 22 * 10**6), 500, 150)]}, "m")
    b = breakdown(before, after, client_mean_s=0.0015)
    assert b.request_count == 400 and b.inference_count == 400 and b.execution_count == 100
    assert b.server_total == pytest.approx(0.001)
    assert b.queue == pytest.approx(0.0005)
    assert b.compute_input == pytest.approx(0.0001)
    assert b.compute_infer == pytest.approx(0.0003)
    assert b.compute_output == pytest.approx(0.00005)
    assert b.avg_batch_size == pytest.approx(4.0)
    assert b.client_minus_server == pytest.approx(0.0005)
    assert b.queue + b.compute_input + b.compute_infer + b.compute_output <= b.server_total


def test_breakdown_without_requests_or_after_a_restart():
    s = snapshot_from_json({"model_stats": [_stats("1", (10, 100), (10, 1), (10, 1), (10, 1), (10, 1), 10, 10)]}, "m")
    idle = breakdown(s, s, None)
    assert idle.request_count == 0 and idle.server_total is None and idle.avg_batch_size is None
    restarted = snapshot_from_json({"model_stats": [_stats("1", (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), 1, 1)]}, "m")
    assert breakdown(s, restarted, None) is None
    assert breakdown(None, s, None) is None


def _agg(duration_s=1.0, cpu_ms=None, lag_ms=None, sent=0, late=0, wait_ms=None):
    agg = Aggregate(0, 4, duration_s, ok=100, sent=sent, late=late)
    agg.cpu_ns = {w: int(ms * 1e6) for w, ms in (cpu_ms or {}).items()}
    agg.wait_ns = {w: int(ms * 1e6) for w, ms in (wait_ms or {}).items()}
    agg.lag_ns = {w: np.array([int(x * 1e6) for x in v], np.int64) for w, v in (lag_ms or {}).items()}
    return agg


def test_audit_quiet_client_is_not_client_bound():
    a = client_audit(_agg(cpu_ms={0: 300, 1: 200}, lag_ms={0: [0.1] * 100}), 8, 0.002, 0.002, 0.0015, False)
    assert a.cpu_percent == pytest.approx(50.0)
    assert a.loop_lag_p99 == pytest.approx(0.0001)
    assert a.overhead_fraction == pytest.approx(0.25)
    assert not a.client_bound and a.reasons == []


def test_audit_busy_worker_is_client_bound():
    a = client_audit(_agg(cpu_ms={0: 950, 1: 100}), 8, 0.002, 0.002, None, False)
    assert a.client_bound
    assert a.reasons == ["load worker 0 busy 95 % of a core"]


def test_audit_lag_counts_when_the_worker_is_busy_or_starved_of_cpu():
    lag = {0: [0.1] * 90 + [10.0] * 10}  # p99 = 10 ms; limit max(2 ms, 25 % of 4 ms) = 2 ms
    busy = client_audit(_agg(cpu_ms={0: 600}, lag_ms=lag), 8, 0.004, 0.004, None, False)
    assert busy.client_bound
    assert busy.reasons == ["event-loop lag p99 10.0 ms (limit 2.0 ms): a worker busy 60 % of a core"]
    starved = client_audit(_agg(cpu_ms={0: 100}, lag_ms=lag, wait_ms={0: 150}), 8, 0.004, 0.004, None, False)
    assert starved.client_bound and "waiting for a CPU 15 % of the time" in starved.reasons[0]
    idle = client_audit(_agg(cpu_ms={0: 100}, lag_ms=lag, wait_ms={0: 50}), 8, 0.004, 0.004, None, False)
    assert not idle.client_bound and idle.loop_lag_p99 == pytest.approx(0.010)
    slow_server = client_audit(_agg(cpu_ms={0: 600}, lag_ms=lag), 8, 0.080, 0.080, None, False)
    assert not slow_server.client_bound  # 10 ms of lag is under 25 % of an 80 ms p50


def test_audit_late_sends_in_rate_mode():
    late = client_audit(_agg(sent=1000, late=20), 8, 0.001, 0.001, None, True)
    assert late.client_bound and late.late_sends == 20 and "2.0 % of requests sent late" in late.reasons[0]
    fine = client_audit(_agg(sent=1000, late=10), 8, 0.001, 0.001, None, True)
    assert not fine.client_bound


def test_no_saturation_point_is_drawn_from_a_client_bound_level():
    from engine.events import ClientAudit, LatencyStats, LevelResult
    from engine.load.sweep import _saturation

    def level(c: int, rps: float, client_bound: bool = False) -> LevelResult:
        return LevelResult(mode="concurrency", level=c, index=0, status="stable", batch_size=1, windows=3, merged_windows=3,
                           requests=1000, errors=0, throughput_rps=rps, throughput_ips=rps, latency=LatencyStats(count=1000),
                           audit=ClientAudit(client_bound=client_bound, reasons=["x"] if client_bound else []))

    flat = [level(8, 1000.0), level(16, 2000.0), level(32, 2010.0), level(64, 2020.0)]
    assert _saturation(flat) == 16
    # the same curve where the flat part was our own limit: nothing is said about the server
    ours = [level(8, 1000.0), level(16, 2000.0, True), level(32, 2010.0, True), level(64, 2020.0, True)]
    assert _saturation(ours) != 16


def _timed(asked_ms: float, answered_ms: float) -> StatsSnapshot:
    return StatsSnapshot(0, 0, {}, {}, asked_ns=int(asked_ms * 1e6), answered_ns=int(answered_ms * 1e6))


@pytest.mark.parametrize(
    "asked_ms, answered_ms, on_time",
    [
        (1000, 1003, True),  # asked on the boundary, answered at once
        (1040, 1070, True),  # a little late: within a quarter of the 300 ms interval
        (1000, 1900, False),  # the answer came most of a window late (the counters are of later)
        (900, 910, False),  # asked a third of a window early
    ],
)
def test_a_snapshot_stands_for_its_boundary_only_when_read_near_it(asked_ms, answered_ms, on_time):
    assert taken_in_time(_timed(asked_ms, answered_ms), boundary_ns=1_000_000_000, interval_ns=300_000_000) is on_time


def test_snapshots_without_timing_or_missing_are_not_judged_late():
    assert taken_in_time(StatsSnapshot(0, 0, {}, {}), 1_000_000_000, 300_000_000)
    assert taken_in_time(None, 1_000_000_000, 300_000_000)


def _timed_agg(latency_us: float, ours_us: float) -> Aggregate:
    agg = _agg(cpu_ms={0: 100})
    agg.latency_ns = np.full(100, int(latency_us * 1e3), np.int64)
    agg.client_ns = np.full(100, int(ours_us * 1e3), np.int64)
    return agg


def test_a_level_whose_measured_client_time_passes_the_transports_limit_is_flagged() -> None:
    from engine.load.audit import delay_limit

    # 5.5 ms a request, our side measured at 0.33 ms (6 %): within the 10 % of HTTP, and of grpc on
    # our own HTTP/2, whose measure is an upper bound
    for transport in ("http", "grpc"):
        assert delay_limit(transport) == pytest.approx(0.10)
        assert not client_audit(_timed_agg(5500, 330), 8, 0.0055, 0.0055, None, False,
                                delay_limit(transport)).client_bound
    # 0.66 ms (12 %): past it
    flagged = client_audit(_timed_agg(5500, 660), 8, 0.0055, 0.0055, None, False, delay_limit("grpc"))
    assert flagged.client_bound and flagged.client_delay_fraction == pytest.approx(0.12)
    assert flagged.reasons == ["our side adds 12.0 % of the mean latency (660 µs a request: responses unread in the "
                               "client, reading, the protocol library's part, late sends; limit 10 %)"]
    # a limit of 5 % (a measure that is only a lower bound) flags the 6 %
    assert client_audit(_timed_agg(5500, 330), 8, 0.0055, 0.0055, None, False, 0.05).client_bound
