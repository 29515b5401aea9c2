"""One load worker process driven directly (no sweep) against the real embedded server."""

from __future__ import annotations

import time

import pytest

from engine.load.dev import LoadDev
from engine.load.pool import WorkerPool
from engine.load.ticks import LevelPlan
from engine.load.worker_messages import (
    PrepareLevel,
    Ready,
    StartAt,
    StopLevel,
    Stopped,
    TickReport,
    UseTransport,
)
from engine.net.connection import DROPPED
from tests.engine.load.conftest import http_payload

pytestmark = [pytest.mark.server, pytest.mark.slow]
TICK = 100_000_000


def _plan(**kw) -> LevelPlan:
    return LevelPlan(level_index=7, tick_ns=TICK, timeout_ns=5_000_000_000, **kw)


async def _run(url: str, info, plan: LevelPlan, ticks_wanted: int):
    pool = WorkerPool(1)
    await pool.start()
    try:
        pool.send(0, UseTransport("engine.triton.transports.http", http_payload(url, info), LoadDev()))
        pool.send(0, PrepareLevel(plan))
        _, ready = await pool.expect(Ready, 10)
        t0 = time.monotonic_ns() + 30_000_000
        pool.send(0, StartAt(t0))
        ticks = []
        while len(ticks) < ticks_wanted:
            _, msg = await pool.receive(5)
            if isinstance(msg, TickReport):
                ticks.append(msg.tick)
        pool.send(0, StopLevel())
        await pool.expect(Stopped, 5)
        procs = list(pool.procs)
    finally:
        await pool.close()
    assert all(p.poll() is not None for p in procs)  # the worker exited
    return ready, ticks


async def test_closed_loop_keeps_exactly_n_in_flight(identity_server, identity_info):
    ready, ticks = await _run(identity_server.http_url, identity_info, _plan(mode="concurrency", slots=5), 10)
    assert (ready.level_index, ready.connected, ready.first_error) == (7, 5, None)  # no connect error
    connect_ns, rtt_us = ready.connect_ns, ready.kernel_rtt_us  # per connection: connect time, the kernel's RTT
    assert len(connect_ns) == 5 and all(0 <= t < 10**9 for t in connect_ns)
    assert len(rtt_us) in (0, 5) and all(0 <= r < 100_000 for r in rtt_us)  # loopback: well under 100 ms
    assert [t.tick for t in ticks] == list(range(10)) and {t.level_index for t in ticks} == {7}
    # at every flush each of the 5 connections has a request in flight: the next request is
    # written inside the callback that completed the previous one
    assert [t.in_flight for t in ticks] == [5] * 10
    assert sum(t.ok for t in ticks) > 50 and not any(t.errors for t in ticks)
    for t in ticks:
        assert len(t.latency_ns) == t.ok and all(x > 0 for x in t.latency_ns)
        assert t.latency_uncorrected_ns is None
    assert sum(t.sent for t in ticks) >= sum(t.ok for t in ticks)
    assert sum(t.cpu_ns for t in ticks) > 0 and sum(len(t.lag_ns) for t in ticks) > 0
    assert all(t.wait_ns is not None and t.wait_ns >= 0 for t in ticks)  # Linux schedstat


async def test_open_loop_sends_on_schedule(identity_server, identity_info):
    plan = _plan(mode="rate", rate=200.0, arrival="constant", max_in_flight=64, preopen=4)
    _, ticks = await _run(identity_server.http_url, identity_info, plan, 30)
    sent = [t.sent for t in ticks]
    # 200/s on a constant schedule from T0: 20 per 100 ms tick, 180 in the first 9 ticks (a
    # send due on a boundary may land one tick later). On a busy box the loop can stall: the
    # sends it owed then go out later, each counted late, or, with max_in_flight requests
    # already in flight, are dropped and counted so; none goes unaccounted
    late = sum(t.late for t in ticks)
    dropped = sum(t.errors.get(DROPPED, 0) for t in ticks)
    assert sum(sent[:9]) <= 181, sent
    assert 177 - sum(sent[:9]) <= late + dropped, (sent, late, dropped)
    assert 0 <= late <= sum(sent)
    for t in ticks:
        assert t.latency_uncorrected_ns is not None and len(t.latency_uncorrected_ns) == t.ok
        # from the intended send time >= from the actual send, request by request
        assert all(c >= u for c, u in zip(t.latency_ns, t.latency_uncorrected_ns, strict=False))


async def test_a_server_that_never_answers_gives_timeouts(identity_info):
    import socket

    # a listening socket that nobody serves: connections open (the kernel accepts them into the
    # backlog) but no response ever comes
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    try:
        plan = _plan(mode="concurrency", slots=2)
        plan.timeout_ns = 300_000_000
        _, ticks = await _run(url, identity_info, plan, 12)
    finally:
        silent.close()
    errors = {}
    for t in ticks:
        for kind, n in t.errors.items():
            errors[kind] = errors.get(kind, 0) + n
    assert sum(t.ok for t in ticks) == 0
    assert errors.get("timeout", 0) >= 4, errors  # 2 slots x (1.2 s / 0.3 s), give or take one
    assert any("no response within 0.3 s" in m for t in ticks for m in t.messages.get("timeout", []))
