"""Adding a server API is one module behind the load engine's seam and its tests (docs/architecture.md,
Recipes, "A server API"). Here a toy API that is not Triton's (tests/engine/load/toy_api.py: one line
each way over TCP, no statistics) is swept end to end: real load worker processes, the scheduler
and the measurement unchanged, against a real server of that protocol in the test. Two files: that
module and this one."""

from __future__ import annotations

import asyncio

import pytest

from engine.errors import UserError
from engine.events import LevelResult
from engine.load.server_api import ServerApi
from engine.load.sweep import run_sweep
from tests.engine.load.conftest import Events, in_flight, in_flight_most, quick_load
from tests.engine.load.toy_api import NAME, ShoutApi, ShoutServer

TEXTS = ["hello", "scale me", "a third line of input"]


def test_the_toy_api_is_a_server_api() -> None:
    api: ServerApi = ShoutApi("shout://127.0.0.1:9", "shout", TEXTS)  # mypy holds it to the Protocol
    assert api.model == "shout" and not api.decoupled and api.stats is None


@pytest.mark.slow
async def test_a_sweep_runs_end_to_end_against_a_server_api_that_is_not_triton() -> None:
    server = ShoutServer()
    port = await server.start()
    events = Events()
    try:
        api = ShoutApi(f"shout://127.0.0.1:{port}", "shout", TEXTS)
        load = quick_load(concurrency=[1, 4], transport=NAME, stability_percent=50, batch_size=2)
        results = await run_sweep(api, load, events.append, asyncio.Event())
    finally:
        await server.close()
    assert [r.level for r in results] == [1.0, 4.0]
    for r in results:
        assert r.status in ("stable", "unstable") and r.errors == 0, (r.status, r.error_messages)
        assert r.requests > 0 and r.latency.p50 is not None and r.latency.p50 > 0
        assert r.server is None  # no statistics in this API: no breakdown, and no warning for lacking them
        assert r.network is not None and r.network.rtt is not None and r.network.rtt_method == "shout health line"  # its own probe
    r4 = results[1]
    assert 0.5 * 4 <= in_flight(r4) <= in_flight_most(r4), (r4.throughput_rps, r4.latency.mean, r4.latency.max)
    assert server.answered >= sum(r.requests for r in results)
    assert not events.of("error") and not events.of("warning")


@pytest.mark.slow
async def test_its_answers_are_checked_and_a_wrong_one_fails_the_level() -> None:
    server = ShoutServer(wrong_every=5)
    port = await server.start()
    events = Events()
    try:
        api = ShoutApi(f"shout://127.0.0.1:{port}", "shout", TEXTS)
        load = quick_load(concurrency=[2], transport=NAME, on_level_failure="stop")
        (r,) = await run_sweep(api, load, events.append, asyncio.Event())
    finally:
        await server.close()
    assert r.status == "failed" and r.errors_by_kind.get("wrong_answer", 0) > 0, (r.status, r.errors_by_kind)
    assert r.error_messages and r.error_messages[0].startswith("shout answered b'OK ")


async def test_a_transport_it_does_not_offer_is_one_line_before_any_load() -> None:
    api = ShoutApi("shout://127.0.0.1:9", "shout", TEXTS)
    with pytest.raises(UserError, match="the shout API offers 'shout', found 'http'"):
        await run_sweep(api, quick_load(transport="http"), Events().append, asyncio.Event())


async def _one_level(stats: object = None, cache: object = None) -> tuple[LevelResult, Events]:
    """One level of the toy API at concurrency 2, its statistics or cache counters replaced."""
    server = ShoutServer()
    port = await server.start()
    events = Events()
    try:
        api = ShoutApi(f"shout://127.0.0.1:{port}", "shout", TEXTS)
        api.stats, api.cache = stats, cache  # type: ignore[assignment]
        load = quick_load(concurrency=[2], transport=NAME, stability_percent=50)
        (r,) = await run_sweep(api, load, events.append, asyncio.Event())
    finally:
        await server.close()
    return r, events


class _Counters:
    """Server statistics for the toy API that never come: either each read stalls past its
    timeout (a busy server), or each says at once that there are none (no such extension)."""

    def __init__(self, stall: bool) -> None:
        self.stall, self.reads = stall, 0

    async def snapshot(self, endpoint: int, timeout_s: float) -> object | None:
        self.reads += 1
        if self.stall:
            await asyncio.sleep(timeout_s)
        return None

    def in_time(self, snapshot: object | None, boundary_ns: int, interval_ns: int) -> bool:
        return True

    def breakdown(self, before, after, client_mean_s):  # type: ignore[no-untyped-def]
        return None


@pytest.mark.slow
@pytest.mark.parametrize("stall", [True, False])
async def test_statistics_that_time_out_are_said_and_statistics_that_do_not_exist_are_not(stall: bool) -> None:
    counters = _Counters(stall)
    r, events = await _one_level(stats=counters)
    assert r.requests > 0 and r.server is None and counters.reads >= 2
    late = [w.message for w in events.of("warning") if w.key.startswith("late-stats")]
    assert bool(late) == stall, late
    if stall:
        assert "did not come within" in late[0] and "server breakdown is not shown" in late[0]


class _StallingCache:
    """An LLM server's cache counters (CacheStats) whose every reading after the first stalls
    past the read timeout: each window's end edge never comes."""

    def __init__(self) -> None:
        self.reads = 0

    async def snapshot(self, timeout_s: float) -> object | None:
        self.reads += 1
        if self.reads > 1:
            await asyncio.sleep(timeout_s)
            return None
        return object()

    def between(self, before, after):  # type: ignore[no-untyped-def]
        raise AssertionError("a window whose edge did not come is not summed")

    def served_before(self, snapshot: object | None) -> bool | None:
        return None

    async def reset(self, timeout_s: float) -> str | None:
        return None


@pytest.mark.slow
async def test_cache_counters_that_time_out_leave_their_windows_out_and_are_said() -> None:
    r, events = await _one_level(cache=_StallingCache())
    assert r.requests > 0 and r.cache is None
    said = [w.message for w in events.of("warning") if w.key.startswith("late-cache")]
    assert len(said) == 1 and "cache counters came too late" in said[0], said
