"""The load engine against the real embedded Triton server (identity model, CPU)."""

from __future__ import annotations

import asyncio
import json
import time

import psutil
import pytest

from engine.errors import UserError
from engine.events import event_from_dict
from engine.load.sweep import run_sweep
from engine.triton.api import TritonApi
from engine.triton.target import Target, describe_target
from tests.engine.load.conftest import (
    Events,
    first_measured_window,
    in_flight,
    in_flight_most,
    kill_tritonserver,
    quick_load,
    sweep,
)

pytestmark = [pytest.mark.server, pytest.mark.slow]


def _load_workers_alive() -> list[psutil.Process]:
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "engine.load.worker" in " ".join(child.cmdline()):
                out.append(child)
        except psutil.NoSuchProcess:
            pass
    return out


async def test_describe_identity(identity_server):
    info = await describe_target(Target(identity_server.http_url, "identity"))
    assert info.inputs == [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16]}]
    assert [o["name"] for o in info.outputs] == ["OUTPUT0"]
    assert info.max_batch_size == 64
    assert info.triton_version and info.model_config.get("name") == "identity"


async def test_unknown_model_is_one_line_listing_the_models(identity_server):
    with pytest.raises(UserError) as err:
        await describe_target(Target(identity_server.http_url, "no_such_model"))
    text = str(err.value)
    assert "'no_such_model' is not available" in text and "models on this server: identity" in text
    assert "\n" not in text


async def test_unreachable_url_is_one_line():
    with pytest.raises(UserError, match=r"cannot reach Triton at http://127.0.0.1:9: connection refused"):
        await describe_target(Target("http://127.0.0.1:9", "identity", timeout_s=2))


async def test_short_sweep_counts_stability_and_breakdown(identity_server, identity_info):
    target = Target(identity_server.http_url, "identity")
    results, events = await sweep(target, identity_info, quick_load(concurrency=[1, 4]))
    assert not _load_workers_alive()
    assert [r.level for r in results] == [1.0, 4.0]
    assert [e.level for e in events.of("level_started")] == [1.0, 4.0]
    assert len(events.of("sweep_finished")) == 1 and events.of("sweep_finished")[0].levels == 2
    for r in results:
        assert r.status in ("stable", "unstable"), r
        assert r.errors == 0 and r.errors_by_kind == {}
        assert r.requests > 0 and r.requests == r.latency.count
        assert r.merged_windows == min(3, r.windows)
        assert r.throughput_rps == pytest.approx(r.requests / r.duration_s)
        assert r.throughput_ips == pytest.approx(r.throughput_rps)  # batch 1
        lat = r.latency
        assert 0 < lat.min <= lat.p50 <= lat.p90 <= lat.p95 <= lat.p99 <= lat.max
        # Little's law: N in flight -> throughput x mean latency ~ N (below it by the client's
        # turnaround between a response and the next send; test_worker_process checks N exactly)
        assert 0.6 * r.level <= in_flight(r) <= in_flight_most(r), (r.throughput_rps, lat.mean, lat.max)
        # sends are counted when sent, completions when complete: at the edges they differ by
        # the requests in flight
        assert r.audit.cpu_percent is not None and abs(r.audit.sent - r.requests) <= 2 * r.level
        s = r.server
        if s is None:  # on a loaded machine the statistics can come a window late: then said, not shown
            assert any(w.key == f"late-stats-{r.index}" for w in events.of("warning")), r
            continue
        assert s.request_count > 0
        # Triton reads its counters one after another while requests complete, so the parts can
        # exceed the total by a hair when its own overhead is tiny (identity: ~1 %)
        parts = s.queue + s.compute_input + s.compute_infer + s.compute_output
        assert parts <= 1.02 * s.server_total, s
        assert s.avg_batch_size >= 1.0
        assert s.client_minus_server == pytest.approx(lat.mean - s.server_total)
        # the server counted what we sent, give or take the requests in flight at the edges
        assert abs(s.request_count - r.requests) <= 0.2 * r.requests + 4 * r.level, (s.request_count, r.requests)
    windows = [w for w in events.of("window") if w.level == 4.0]
    warmup = [w for w in windows if w.warmup]
    measured = [w for w in windows if not w.warmup]
    assert len(warmup) == 1 and warmup[0].server is None and warmup[0].index == 0
    assert [w.index for w in measured] == list(range(1, len(measured) + 1))
    assert len(measured) == results[1].windows
    assert measured[-1].stable_so_far == (results[1].status == "stable")
    late = any(w.key == f"late-stats-{results[1].index}" for w in events.of("warning"))
    for w in measured:
        assert w.requests >= 20 and (w.server is not None or late)
        if w.server is not None:
            parts = w.server.queue + w.server.compute_input + w.server.compute_infer + w.server.compute_output
            assert parts <= 1.02 * w.server.server_total, w.server
        assert w.t_end > w.t_start
        assert w.throughput_rps == pytest.approx(w.requests / (w.t_end - w.t_start), rel=1e-6)
    # every event survives the JSON round trip the recorder does
    for e in events:
        assert event_from_dict(json.loads(json.dumps(e.to_dict()))) == e


async def test_two_workers_share_exactly_n_in_flight(identity_server, identity_info):
    target = Target(identity_server.http_url, "identity")
    results, events = await sweep(target, identity_info, quick_load(concurrency=[3], workers=2))
    assert events.of("level_started")[0].workers == 2
    (r,) = results
    assert r.status in ("stable", "unstable")
    assert 0.6 * 3 <= in_flight(r) <= in_flight_most(r), (r.throughput_rps, r.latency.mean, r.latency.max)
    assert not _load_workers_alive()


async def test_wrong_model_name_gives_counted_errors_and_a_clear_message(identity_server, identity_info):
    target = Target(identity_server.http_url, "no_such_model")
    results, events = await sweep(target, identity_info, quick_load(concurrency=[2, 4], on_level_failure="stop"))
    (r,) = results  # on_level_failure = "stop": the second level never runs
    assert r.status == "failed"
    assert r.requests == 0 and r.errors > 0
    assert set(r.errors_by_kind) == {"rejected"}
    assert any(m.startswith("HTTP 404: ") and "no_such_model" in m for m in r.error_messages), r.error_messages
    (error,) = events.of("error")
    assert "level 2 failed" in error.message and "rejected" in error.message and "no_such_model" in error.message
    assert "\n" not in error.message
    assert events.of("sweep_finished")[0].failed == 1


async def test_wrong_input_shape_gives_counted_errors(identity_server, identity_info):
    target = Target(identity_server.http_url, "identity", input_shapes={"INPUT0": [8]})
    results, events = await sweep(target, identity_info, quick_load(concurrency=[2]))
    (r,) = results
    assert r.status == "failed" and r.errors_by_kind.get("rejected", 0) == r.errors > 0
    assert any("INPUT0" in m and "shape" in m for m in r.error_messages), r.error_messages
    assert events.of("error")


async def test_rate_mode_measures_from_intended_send_time(identity_server, identity_info):
    target = Target(identity_server.http_url, "identity")
    for arrival, burstiness in (("constant", 1.0), ("poisson", 1.0), ("gamma", 0.5)):  # gamma 0.5: bursty
        load = quick_load(mode="rate", rates=[200.0], arrival=arrival, burstiness=burstiness, min_window_requests=30,
                          stability_percent=25)
        results, events = await sweep(target, identity_info, load)
        (r,) = results
        assert r.status in ("stable", "unstable")
        assert r.target_rate == 200.0
        assert events.of("level_started")[0].arrival == arrival
        # either the schedule was kept, or the audit says the client did not keep it (a stalled
        # worker catches up by sending the overdue requests at once: wrk2's rule)
        if not r.audit.client_bound:
            assert r.throughput_rps == pytest.approx(200.0, rel=0.3), r.audit
        else:  # late sends, or the delay they (and a busy loop) add to the latency
            assert r.audit.late_sends > 0.01 * r.audit.sent or r.audit.client_delay_fraction > 0.10, r.audit
        unc = r.latency_uncorrected
        assert unc is not None and unc.count == r.latency.count
        # each request's corrected latency >= its uncorrected one, so every order statistic is too
        assert r.latency.p50 >= unc.p50 and r.latency.max >= unc.max and r.latency.mean >= unc.mean
        assert abs(r.audit.sent - r.requests) <= 20 and 0 <= r.audit.late_sends <= r.audit.sent
    assert not _load_workers_alive()


async def test_stop_finishes_the_current_window_and_returns_promptly(identity_server, identity_info):
    target = Target(identity_server.http_url, "identity")
    stop = asyncio.Event()
    # stability_percent tiny: the level would run all 40 windows (12 s) if not stopped
    load = quick_load(concurrency=[2, 4], max_windows=40, stability_percent=0.001)
    events = Events()
    task = asyncio.create_task(run_sweep(TritonApi(target, identity_info), load, events.append, stop))
    await first_measured_window(events)
    stop.set()
    t_stop = time.monotonic()
    results = await task
    assert time.monotonic() - t_stop < 2.5
    (r,) = results
    assert r.status == "interrupted" and r.windows >= 1 and r.requests > 0
    assert events.of("sweep_finished")[0].levels == 1
    assert not _load_workers_alive()


async def test_server_stopped_mid_level(tmp_path):
    from engine.server.embedded import EmbeddedServer

    srv = EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path)
    await asyncio.get_running_loop().run_in_executor(None, srv.start)
    try:
        target = Target(srv.http_url, "identity")
        info = await describe_target(target)
        load = quick_load(concurrency=[4], max_windows=30, stability_percent=0.001, request_timeout_s=2.0)
        events = Events()
        task = asyncio.create_task(run_sweep(TritonApi(target, info), load, events.append, asyncio.Event()))
        await first_measured_window(events)
        kill_tritonserver(srv)
        results = await asyncio.wait_for(task, 30)
    finally:
        srv.stop()
    (r,) = results
    assert r.status == "failed"
    assert r.requests > 0  # it worked before the server went away
    kinds = set(r.errors_by_kind)
    assert kinds and kinds <= {"connection_refused", "connection_reset", "timeout", "server_error", "bad_response"}, kinds
    assert "connection_refused" in kinds
    (error,) = events.of("error")
    assert "level 4 failed" in error.message and "connection_refused" in error.message
    assert not _load_workers_alive()


async def test_a_dead_worker_ends_the_sweep_with_an_error_event(identity_server, identity_info):
    target = Target(identity_server.http_url, "identity")
    load = quick_load(concurrency=[2, 4], max_windows=40, stability_percent=0.001)
    events = Events()
    task = asyncio.create_task(run_sweep(TritonApi(target, identity_info), load, events.append, asyncio.Event()))
    await first_measured_window(events)
    (worker,) = _load_workers_alive()
    worker.kill()
    results = await asyncio.wait_for(task, 30)
    assert results == []  # the level in progress has no result
    (error,) = events.of("error")
    assert error.fatal and error.message.startswith("load generator failed: load worker 0 exited (code -9)")
    assert events.of("sweep_finished")[0].levels == 0
    assert not _load_workers_alive()


async def test_unusable_request_is_a_user_error_before_any_load(identity_server, identity_info):
    target = Target(identity_server.http_url, "identity")
    with pytest.raises(UserError, match=r"batch size 65 exceeds model 'identity''s max_batch_size \(64\)"):
        await sweep(target, identity_info, quick_load(batch_size=65))
    with pytest.raises(UserError, match="server URL"):
        await sweep(Target("ftp://x", "identity"), identity_info, quick_load())
    assert not _load_workers_alive()


async def test_a_deliberately_slowed_worker_is_flagged_by_its_own_delay(identity_server, identity_info):
    """A worker whose loop is busy 15 ms out of every 20 leaves responses unread in its socket:
    the per-request measure of our side catches it and the level is called client-bound."""
    target = Target(identity_server.http_url, "identity")
    results, events = await sweep(target, identity_info, quick_load(concurrency=[2], stability_percent=50, dev_stall_ms=15))
    (r,) = results
    # a developer setting says so, in the run's warnings (and in its profile, when recorded)
    assert any(w.message.startswith("developer settings in effect (load.dev_stall_ms = 15)") for w in events.of("warning"))
    assert r.audit.client_delay_fraction is not None and r.audit.client_delay_fraction > 0.10, r.audit
    assert r.audit.client_bound
    assert any(reason.startswith("our side adds") for reason in r.audit.reasons), r.audit.reasons


async def test_a_quiet_worker_measures_little_delay_of_its_own(identity_server, identity_info):
    target = Target(identity_server.http_url, "identity")
    results, _ = await sweep(target, identity_info, quick_load(concurrency=[2], stability_percent=50))
    (r,) = results
    audit = r.audit
    assert audit.client_delay_p50 is not None and audit.write_p50 is not None and audit.first_byte_p50 is not None
    # the phases are parts of the latency: none can exceed it
    assert audit.client_delay_p50 <= r.latency.p99 and audit.first_byte_p50 <= r.latency.max
