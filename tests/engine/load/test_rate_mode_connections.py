"""How rate mode opens connections. Before the level (Worker.open_grouped), as concurrency mode
does: the connections already open keep sending while later groups connect, so that Triton's
HTTP front end spreads the later ones over other threads; once the last group is connected the
warming stops, and the level is ready only when every connection is idle. During the level,
when every connection is busy (Worker.open_more): a tight group is opened, whose connections
carry the requests waiting for one, in order. Against the real embedded identity server, one
worker in this process."""

from __future__ import annotations

import asyncio
import time
from multiprocessing import Pipe

import pytest

from engine.load import worker as worker_module
from engine.load.ticks import LevelPlan
from engine.load.worker import TickBuffer, Worker
from engine.net.tcp import TcpDialer
from engine.triton.transports.http import HttpConnection
from tests.engine.load.conftest import use_http

pytestmark = [pytest.mark.server]


def _plan(mode: str) -> LevelPlan:
    extra = dict(rate=100.0, arrival="constant", max_in_flight=16, preopen=6) if mode == "rate" else dict(slots=6)
    return LevelPlan(level_index=0, mode=mode, tick_ns=100_000_000, timeout_ns=5_000_000_000, **extra)


async def _until(condition, timeout_s: float = 5.0) -> None:
    """Wait for ``condition`` (a loaded CI box answers slowly); the test's assertions decide."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("mode", ["rate", "concurrency"])
def test_open_connections_keep_sending_while_later_groups_connect(monkeypatch, identity_server, identity_info, mode):
    monkeypatch.setattr(worker_module, "OPEN_GROUP", 2)
    sends: dict[int, int] = {}
    real_send = HttpConnection.send

    def counting_send(slot: HttpConnection, intended_ns: int = 0) -> int:
        sends[id(slot)] = sends.get(id(slot), 0) + 1
        return real_send(slot, intended_ns)

    monkeypatch.setattr(HttpConnection, "send", counting_send)
    real_connect = TcpDialer.connect_tight

    async def slow_connect(self, slots, infos, at_ns):
        # the next group waits until every open connection was answered and (if warming)
        # sent again, or 5 s
        opened = [s for s in self.w.slots if s.connected]
        await _until(lambda: all(sends.get(id(s), 0) >= 2 for s in opened))
        return await real_connect(self, slots, infos, at_ns)

    monkeypatch.setattr(TcpDialer, "connect_tight", slow_connect)
    url = identity_server.http_url

    async def main():
        ours, theirs = Pipe()
        w = Worker(0, ours)
        use_http(w, url, identity_info)
        await w.prepare(_plan(mode))
        ready = theirs.recv()
        state = ([sends.get(id(s), 0) for s in w.slots], [s.busy for s in w.slots], w.warming)
        w.stop_level()
        return ready, state

    ready, (per_slot, busy, warming) = asyncio.run(main())
    assert (ready.level_index, ready.connected, ready.first_error) == (0, 6, None)
    # three groups of two, 0.2 s apart: the first group sent again while the others connected
    assert min(per_slot[:2]) >= 2, per_slot
    assert all(n >= 1 for n in per_slot), per_slot
    if mode == "rate":
        # the schedule starts from idle connections: no warming request left in flight
        assert not warming and not any(busy)
    else:
        assert warming  # concurrency mode keeps every connection busy until T0


def _counting_sends(monkeypatch) -> list[int]:
    intended_times: list[int] = []
    real_send = HttpConnection.send

    def counting_send(slot: HttpConnection, intended_ns: int = 0) -> int:
        intended_times.append(intended_ns)
        return real_send(slot, intended_ns)

    monkeypatch.setattr(HttpConnection, "send", counting_send)
    return intended_times


def _start_by_hand(w: Worker) -> Worker:
    """What start_at() sets up for a rate-mode level, without the schedule: the test dispatches."""
    w.open_loop = True
    w.tick_buffer = TickBuffer(0, 0, 0, 10**12, rate_mode=True)
    w.running = True
    return w


def _bare_rate_worker(url: str, info=None) -> Worker:
    """A rate-mode worker with no connection open yet (prepare() not run)."""
    w = Worker(0, Pipe()[0])
    use_http(w, url, info)
    w.plan = _plan("rate")
    return _start_by_hand(w)


async def _ready_rate_worker(url: str, info) -> Worker:
    ours, theirs = Pipe()
    w = Worker(0, ours)
    use_http(w, url, info)
    plan = _plan("rate")
    plan.preopen = 1
    await w.prepare(plan)
    ready = theirs.recv()
    assert (ready.level_index, ready.connected, ready.first_error) == (0, 1, None)
    return _start_by_hand(w)


def test_a_busy_worker_opens_a_group_whose_connections_carry_the_waiting_requests(monkeypatch, identity_server,
                                                                                   identity_info):
    monkeypatch.setattr(worker_module, "OPEN_GROUP", 4)
    url = identity_server.http_url

    async def main():
        w = await _ready_rate_worker(url, identity_info)
        intended_times = _counting_sends(monkeypatch)
        for intended in (11, 12, 13):  # in one turn of the loop: no answer can free a connection
            w.dispatch(intended, 100)
        queued = (w.open_count, w.coming, list(w.waiting))
        await _until(lambda: len(w.idle) == 5)  # the group connects; the three requests are answered
        state = (w.open_count, w.coming, list(w.waiting), len(w.idle), dict(w.tick_buffer.errors), intended_times)
        w.stop_level()
        return queued, state

    queued, (open_count, coming, waiting, idle, errors, intended_times) = asyncio.run(main())
    # the first request took the idle connection; the second opened a group of 4, which the
    # third waits for too, leaving 2 of the group unclaimed
    assert queued == (5, 2, [12, 13])
    assert intended_times == [11, 12, 13]  # each sent once, in order, with its intended time
    assert (open_count, coming, waiting, errors) == (5, 2, [], {})
    assert idle == 5  # all answered: every connection is idle again


def test_a_group_that_cannot_connect_counts_each_waiting_request_as_refused(monkeypatch):
    monkeypatch.setattr(worker_module, "OPEN_GROUP", 4)

    async def main():
        # a port that had a listener when the level was planned, and has none now
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        w = _bare_rate_worker(url)
        w.dialer.infos = await w.dialer.resolve()
        server.close()
        await server.wait_closed()
        for intended in (1, 2):  # no idle connection: the first opens a group, the second waits
            w.dispatch(intended, 100)
        await _until(lambda: not w.waiting and not w.slots)
        state = (w.open_count, w.coming, list(w.waiting), len(w.slots), dict(w.tick_buffer.errors))
        w.stop_level()
        return state

    open_count, coming, waiting, slots, errors = asyncio.run(main())
    assert (open_count, coming, waiting, slots) == (0, 0, [], 0)
    assert errors == {"connection_refused": 2}


def test_a_group_the_server_closes_at_once_leaves_no_connection_counted(monkeypatch, identity_info):
    """A server that closes every connection as soon as it accepts it: whichever way each close
    lands (before or after the group's connect returns), no connection stays counted and each
    waiting request ends as one error."""
    monkeypatch.setattr(worker_module, "OPEN_GROUP", 4)

    async def main():
        def close_at_once(reader, writer):
            writer.close()

        server = await asyncio.start_server(close_at_once, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        w = _bare_rate_worker(url, identity_info)
        for intended in (1, 2):
            w.dispatch(intended, 100)
        await _until(lambda: not w.waiting and not w.slots and sum(w.tick_buffer.errors.values()) >= 2)
        state = (w.open_count, len(w.slots), len(w.idle), list(w.waiting), sum(w.tick_buffer.errors.values()))
        w.stop_level()
        server.close()
        await server.wait_closed()
        return state

    open_count, slots, idle, waiting, errors = asyncio.run(main())
    assert (open_count, slots, idle, waiting) == (0, 0, 0, [])
    assert errors == 2
