"""A load worker process: one event loop driving raw HTTP/1.1 keep-alive connections.

Run as ``python -m engine.load.worker <fd> <index>``: ``fd`` is this end of a socket pair with
the session, which sends pickled commands (("request", bytes, outputs), ("level", LevelPlan),
("go", t0_ns), ("stop",), ("exit",)) and receives ("hello"|"ready"|"stopped"|"tick"|"fatal").

Hot path, per response: one ``buffer_updated`` callback (the socket was read straight into the
connection's own buffer) frames the response from its head (Content-Length), records the latency into the current tick and, in concurrency mode, writes the
same pre-encoded request bytes again on the same connection. No coroutine, future, or JSON
per request; JSON is parsed only for an error body or the first response of a level.
Only the standard library and two small modules of ours are imported here (no numpy: a
worker starts in tens of milliseconds of CPU, not hundreds).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import random
import select
import selectors
import signal
import socket
import sys
import time
from array import array
from collections import deque
from multiprocessing.connection import Connection
from typing import Any

from engine.load.diagnosis import diagnosis_knobs
from engine.load.http1 import BadResponse, Head, dechunk, error_message, parse_head
from engine.load.ticks import LATE_SEND_NS, MESSAGES_PER_KIND, LevelPlan, Tick
from engine.modes import mode_of

monotonic_ns = time.monotonic_ns  # CLOCK_MONOTONIC: shared with the session's T0
LAG_PROBE_NS = 10_000_000  # how often the loop-lag probe asks to run
TIMEOUT_SCAN_NS = 50_000_000
SELECT_WAITED_NS = 50_000  # select() that took longer than this waited for the kernel
BACKOFF_MIN_S = 0.01
BACKOFF_MAX_S = 0.5
INITIAL_BUFFER = 8192  # per connection; grows to the largest response seen on it


_DIAG = diagnosis_knobs()
_DIAG_SNDBUF = _DIAG.get("sndbuf", 0)
_DIAG_LAZY = "lazy" in _DIAG
_DIAG_BURST = "burst" in _DIAG
_DIAG_ONE_BY_ONE = "one_by_one" in _DIAG
_DIAG_RATE_COLD = "rate_cold" in _DIAG  # rate mode opens as before session 8: no warming, one by one
OPEN_GROUP = _DIAG.get("group", 0) or 8  # sockets per tight group of connects (open_grouped says why)
# worker w connects its first group w x this after the level's common instant (open_grouped)
OPEN_STAGGER_NS = _DIAG["stagger_us"] * 1000 if "stagger_us" in _DIAG else 3_000_000
_DIAG_STALL_NS = _DIAG.get("stall_ms", 0) * 1_000_000


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def run_queue_wait_ns() -> int | None:
    """Nanoseconds this (single-threaded) worker has spent runnable but not running: the CPU
    contention it suffered. Linux /proc/self/schedstat; None where there is none."""
    try:
        with open("/proc/self/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


class TickBuffer:
    """Accumulates one tick at a time; completions are attributed by their completion time."""

    def __init__(self, worker: int, level_index: int, t0_ns: int, tick_ns: int, rate_mode: bool) -> None:
        self.worker = worker
        self.level_index = level_index
        self.t0 = t0_ns
        self.tick_ns = tick_ns
        self.rate_mode = rate_mode
        self.index = 0
        self.end = t0_ns + tick_ns
        self.closed: dict[int, Tick] = {}
        self.next_flush = 0
        self.cpu_mark = time.process_time_ns()
        self.wait_mark = run_queue_wait_ns()
        self._fresh()

    def _fresh(self) -> None:
        self.lat: list[int] = []
        self.unc: list[int] = []
        self.errors: dict[str, int] = {}
        self.messages: dict[str, list[str]] = {}
        self.sent = 0
        self.late = 0
        self.lags: list[int] = []
        self.write: list[int] = []
        self.wait: list[int] = []
        self.client: list[int] = []

    def _close(self) -> None:
        self.closed[self.index] = Tick(
            worker=self.worker,
            level_index=self.level_index,
            tick=self.index,
            ok=len(self.lat),
            latency_ns=array("q", self.lat),
            latency_uncorrected_ns=array("q", self.unc) if self.rate_mode else None,
            errors=self.errors,
            messages=self.messages,
            sent=self.sent,
            late=self.late,
            lag_ns=array("q", self.lags),
            write_ns=array("q", self.write),
            server_wait_ns=array("q", self.wait),
            client_ns=array("q", self.client),
        )

    def roll(self, now: int) -> None:
        """Close the current tick and move to the one that holds ``now``."""
        self._close()
        self.index = max(self.index + 1, (now - self.t0) // self.tick_ns)
        self.end = self.t0 + (self.index + 1) * self.tick_ns
        self._fresh()

    def ok(self, latency: int, uncorrected: int, now: int, write: int, wait: int, client: int) -> None:
        if now >= self.end:
            self.roll(now)
        self.lat.append(latency)
        if self.rate_mode:
            self.unc.append(uncorrected)
        self.write.append(write)
        self.wait.append(wait)
        self.client.append(client)

    def error(self, kind: str, message: str, now: int) -> None:
        if now >= self.end:
            self.roll(now)
        self.errors[kind] = self.errors.get(kind, 0) + 1
        kept = self.messages.setdefault(kind, [])
        if len(kept) < MESSAGES_PER_KIND and message not in kept:
            kept.append(message)

    def sent_one(self, now: int, late: bool) -> None:
        if now >= self.end:
            self.roll(now)
        self.sent += 1
        if late:
            self.late += 1

    def lag(self, lag_ns: int, now: int) -> None:
        if now >= self.end:
            self.roll(now)
        self.lags.append(lag_ns)

    def flush(self, upto: int) -> list[Tick]:
        """Every tick up to ``upto`` (inclusive), empty ones included; CPU goes to the last."""
        if self.index <= upto:
            self._close()
            self.index = upto + 1
            self.end = self.t0 + (self.index + 1) * self.tick_ns
            self._fresh()
        out = []
        for k in range(self.next_flush, upto + 1):
            tick = self.closed.pop(k, None) or Tick(self.worker, self.level_index, k)
            out.append(tick)
        self.next_flush = upto + 1
        cpu = time.process_time_ns()
        if out:
            out[-1].cpu_ns = cpu - self.cpu_mark
        self.cpu_mark = cpu
        wait = run_queue_wait_ns()
        if out and wait is not None and self.wait_mark is not None:
            out[-1].wait_ns = wait - self.wait_mark
        self.wait_mark = wait
        return out


class Slot(asyncio.BufferedProtocol):
    """One keep-alive connection carrying at most one request at a time.

    A BufferedProtocol: the socket is read straight into this slot's own buffer (recv_into).
    With a plain Protocol, asyncio allocates a fresh 256 KiB bytes object for every read, which
    glibc serves by mmap/munmap unless something (importing numpy did) has raised its mmap
    threshold. Measured at concurrency 8 on identity (worker CPU per request): plain Protocol
    82-102 us without numpy, 50-58 us with it; BufferedProtocol 48-51 us.
    """

    def __init__(self, worker: Worker) -> None:
        self.w = worker
        self.tr: asyncio.Transport | None = None
        self.buf = bytearray(INITIAL_BUFFER)
        self.view = memoryview(self.buf)
        self.filled = 0
        self.need = 0  # bytes the response being read needs (from its Content-Length)
        self.head: Head | None = None
        self.busy = False
        self.sent_ns = 0
        self.intended_ns = 0
        self.written_ns = 0  # the whole request is in the kernel's hands
        self.first_ns = 0  # the response's first bytes were read
        self.paused = False  # the transport holds unsent bytes of the request
        self.unread_ns = 0  # how long the response may have waited in our socket (upper bound)
        self.backoff = BACKOFF_MIN_S
        self.generation = worker.generation

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport  # type: ignore[assignment]  # a TCP connection: asyncio hands a Transport
        # pause_writing as soon as the transport keeps any byte back, resume_writing when it has
        # handed the last one to the kernel: the end of each request's write, at no cost when
        # the kernel takes the whole request at once
        transport.set_write_buffer_limits(high=0)  # type: ignore[attr-defined]  # a WriteTransport
        self.paused = False
        if _DIAG_SNDBUF:  # diagnosis only (bench/diag_fidelity.py): a fixed send buffer
            sock = transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _DIAG_SNDBUF)
        self.backoff = BACKOFF_MIN_S
        self.filled = self.need = 0
        self.head = None

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.filled >= len(self.buf) or self.need > len(self.buf):
            # a new, larger buffer (not a resize: asyncio may still hold a view of the old one)
            bigger = bytearray(max(2 * len(self.buf), self.need))
            bigger[: self.filled] = self.view[: self.filled]
            self.buf, self.view = bigger, memoryview(bigger)
        return self.view[self.filled :]

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.busy and self.written_ns == 0:
            self.written_ns = monotonic_ns()

    def buffer_updated(self, nbytes: int) -> None:
        if self.filled == 0:
            self.first_ns = monotonic_ns()
            selector = self.w.selector
            self.unread_ns = self.first_ns - selector.unread_since() if selector is not None else 0
        self.filled += nbytes
        if not self.busy:
            self.w.unexpected(self, "bytes received with no request in flight")
            return
        head = self.head
        if head is None:
            try:
                head = parse_head(self.buf, self.filled)
            except BadResponse as exc:
                self.w.failed(self, "bad_response", str(exc))
                return
            if head is None:
                return
            self.head = head
        if head.content_length is not None:
            end = head.head_len + head.content_length
            self.need = end  # the next get_buffer makes room for the whole body at once
        elif head.chunked:
            try:
                decoded = dechunk(bytes(self.view[head.head_len : self.filled]))
            except BadResponse as exc:
                self.w.failed(self, "bad_response", str(exc))
                return
            end = -1 if decoded is None else head.head_len + decoded[1]
        else:
            self.w.failed(self, "bad_response", "response without Content-Length")
            return
        if end < 0 or self.filled < end:
            return
        if self.filled > end:
            self.w.failed(self, "bad_response", "more bytes than the response holds")
            return
        self.head = None
        self.filled = 0
        self.need = 0
        self.w.completed(self, head, self.buf, end)

    def connection_lost(self, exc: Exception | None) -> None:
        self.tr = None
        self.filled = self.need = 0
        self.head = None
        self.w.lost(self, exc)

    # -- ours

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        self.written_ns = 0
        self.tr.write(self.w.raw)  # type: ignore[union-attr]  # only connected slots send
        if not self.paused:
            self.written_ns = monotonic_ns()
        return now

    def abort(self) -> None:
        if self.tr is not None:
            self.tr.abort()


def _connect_error_kind(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(exc, ConnectionResetError):
        return "connection_reset"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    return "connect_error"


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "closed by the server"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]


class Worker:
    def __init__(self, index: int, conn: Connection, selector: PreciseEpollSelector | None = None) -> None:
        self.index = index
        self.selector = selector
        self.conn = conn
        self.loop = asyncio.get_running_loop()
        self.raw = b""  # the request every connection sends (one per sweep: the "request" message)
        self.outputs: list[str] = []
        self.plan: LevelPlan | None = None
        self.tick_buffer: TickBuffer | None = None
        self.running = False  # between "go" and "stop": requests may be sent
        self.warming = False  # while a level's connections open: those open keep busy (open_grouped)
        self.open_loop = False  # the level's mode sends on a schedule (rate), not on each response
        self.generation = 0  # bumps per level so that late callbacks of an old level are ignored
        self.slots: list[Slot] = []
        self.idle: deque[Slot] = deque()
        self.open_count = 0
        # rate mode, when every connection is busy: intended send times waiting for a group of
        # connections being opened (open_more), and how many of those no request has claimed yet
        self.waiting: deque[int] = deque()
        self.coming = 0
        self.infos: list[Any] = []  # the server's addresses, resolved once per level
        self.checked = False
        self.handles: list[asyncio.TimerHandle] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        self.done = asyncio.Event()
        self.rng = random.Random()
        self.next_ns = 0.0  # rate mode: when the next request is due (fractional ns add up)
        self.gap_ns = 0.0

    # -- control channel

    def send_msg(self, msg: tuple[Any, ...]) -> None:
        try:
            self.conn.send(msg)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self.done.set()  # the session is gone: nothing left to measure for

    def on_control(self) -> None:
        try:
            while self.conn.poll():
                self.handle(self.conn.recv())
        except (EOFError, OSError):
            self.done.set()

    def handle(self, msg: tuple[Any, ...]) -> None:
        cmd = msg[0]
        if cmd == "request":
            self.raw, self.outputs = msg[1], list(msg[2])
        elif cmd == "level":
            self.stop_level()
            self.spawn(self.prepare(msg[1]))
        elif cmd == "go":
            self.go(msg[1])
        elif cmd == "stop":
            self.stop_level()
            self.send_msg(("stopped", self.plan.level_index if self.plan else -1))
        elif cmd == "exit":
            self.stop_level()
            self.done.set()

    def spawn(self, coro: Any) -> None:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.send_msg(("fatal", f"load worker {self.index}: {type(exc).__name__}: {exc}"))

    # -- level lifecycle

    async def prepare(self, plan: LevelPlan) -> None:
        self.plan = plan
        # the mode's strategy, read once per level: the per-response paths test this flag
        self.open_loop = mode_of(plan.mode).open_loop
        if self.selector is not None:
            self.selector.precise = self.open_loop  # sends on schedule need timers on time
        self.generation += 1
        self.checked = False
        self.rng = random.Random(plan.seed)
        count = plan.preopen if self.open_loop else plan.slots
        self.slots = [Slot(self) for _ in range(count)]
        self.open_count = len(self.slots)
        if _DIAG_LAZY and not self.open_loop:
            self.send_msg(("ready", plan.level_index, len(self.slots), None))
            return
        if _DIAG_BURST:
            results = await asyncio.gather(*(self.open(s) for s in self.slots), return_exceptions=True)
            first_error = next((_describe(r) for r in results if isinstance(r, BaseException)), None)
        else:
            # the connections opened first carry load while the next are opened (open_grouped);
            # in concurrency mode until T0, in rate mode until the last group is connected
            self.warming = not (self.open_loop and _DIAG_RATE_COLD)
            opener = self.open_one_by_one if _DIAG_ONE_BY_ONE else self.open_grouped
            first_error = await opener(self.slots, wait=self.open_loop)
        connected = sum(1 for s in self.slots if s.tr is not None)
        if self.open_loop:
            self.idle = deque(s for s in self.slots if s.tr is not None)
            self.slots = list(self.idle)
            self.open_count = len(self.slots)
        self.send_msg(("ready", plan.level_index, connected, first_error))

    async def await_first_answers(self, primed: list[Slot]) -> None:
        """Rate mode: every connection is open, so stop warming; the level is ready when the
        requests in flight are answered (the schedule starts with every connection idle); a
        slot with no answer by the timeout starts afresh."""
        self.warming = False
        deadline = monotonic_ns() + (self.plan.timeout_ns if self.plan else 10**10)
        while any(s.busy for s in primed) and monotonic_ns() < deadline:
            await asyncio.sleep(0.002)
        for slot in primed:
            if slot.busy:
                slot.busy = False
                slot.abort()

    async def open_one_by_one(self, slots: list[Slot], wait: bool) -> str | None:
        """The second way (sessions 4-5), kept for A/B runs (GPUSCALE_LOAD_DIAG one_by_one):
        open the connections one at a time, each carrying a first request before the next is
        opened. open_grouped says what it measured."""
        first_error: str | None = None
        primed: list[Slot] = []
        for slot in slots:
            try:
                await self.open(slot)
            except (TimeoutError, OSError) as exc:
                first_error = first_error or _describe(exc)
                continue
            if self.raw:
                slot.send()
                primed.append(slot)
        if wait:
            await self.await_first_answers(primed)
        return first_error

    async def open_grouped(self, slots: list[Slot], wait: bool) -> str | None:
        """Open the level's connections in tight groups of OPEN_GROUP: each group's sockets
        connect in one loop of non-blocking connects (no await between them), then carry a
        first (unmeasured) request while the next group connects. Worker w connects its first
        group at the plan's common instant (LevelPlan.open_at_ns) plus w x OPEN_STAGGER_NS. The
        open connections keep sending (``warming``): in concurrency mode (``wait`` False) until
        T0; in rate mode until the last group is connected, and then their answers are awaited
        before the level is ready.

        Rate mode warmed nothing until session 8: each connection sent one request and went
        idle. Warming alone did not move where ours land (6-8 of 32 threads either way, calls
        1-2 of docs/results/rate_mode_connections_h200.md); in rate mode what mattered was the
        connections opened during the level (open_more says what was measured).

        Why (issue 13): Triton's HTTP front end (libevhtp) hands a new connection, for good, to
        the first of its threads that is not running a request handler and has no connection
        waiting in its pipe (read from the tritonserver binary). A thread that holds a third of
        the connections reads every request body of them, and caps the server below what its
        GPUs do; neither Triton's statistics (its timer starts after the body is read) nor the
        client can see why (engine/http_threads.py shows where each connection sits).
        - Connections that arrive apart find the first thread idle again, and pile onto it. That
          is what asyncio's connects are, one await apart, whether one at a time or gathered.
        - A few connections that arrive together are accepted in one batch by the listener,
          and each finds the threads before it with a connection still in their pipes: they
          spread. A tight loop of connects delivers them together.
        - Many at once crowd again: the later ones find the first threads drained. One burst of
          every socket put 86-90 of 128 on one thread; every worker's group of 8 at the same
          instant (c=64: 8 workers, 64 connects) put 25-41 of 64 on one thread.
        - A thread that runs request handlers is skipped: connections that arrive while earlier
          ones carry load spread further. Hence groups, each sending before the next connects,
          and workers whose first groups arrive 3 ms apart.

        Measured on 2x H200 (32 cores, 8 load workers), 2x variant of the embedded ViT-B/32,
        http, perf_analyzer in the same runs, 2 rounds per arm (docs/results/
        connection_placement_h200.md, calls 2, 3, 5 and 6); ours / perf_analyzer, and how many
        of ours the busiest HTTP thread held:
        | images per request, c | one at a time     | one tight burst   | groups of 8       | groups of 8, staggered 3 ms (kept) |
        | 8 (4.8 MB), 16        | 0.47-0.62 (11-15) | 1.02-2.47 (4-8)   | 1.18-1.61 (4-8)   | 0.84, 1 run (8)                    |
        | 8, 64                 | 0.49-0.77 (40-42) | 0.81-1.04 (30-40) | 0.97-1.08 (29-44) | 1.06-1.09 (18-20)                  |
        | 1 (602 KB), 64        | 0.95-1.10 (28-31) | 0.86-0.90 (35-36) | 0.69-0.97 (25-41) | 0.94-0.96 (17-18)                  |
        | 1, 128                | 0.92-0.95 (38-43) | 0.67-0.80 (86-90) | 0.96-1.04 (40-47) | 1.02-1.17 (29-30)                  |
        perf_analyzer's busiest thread held 14-26 of 64 and 21-29 of 128 in call 6. Its own
        throughput varied by up to 40 % between rounds at a level, with its placement (3.9k
        images/s with 14 of 16 connections on one thread, 8.4k spread), so single ratios far
        from 1 at c=16 are often its draw. One OS thread per connect, released together, did
        not spread better (call 5: 0.59-0.93).

        What did not work before (one connection at a time from asyncio in every arm): bursts
        from asyncio, re-opening connections that landed on a crowded thread, choosing from a
        burst of spares via /proc, pacing opens 2-6 ms apart (docs/results/
        images_per_request_and_placement_h200.md and four_h200_fidelity_transports_study.md).
        """
        plan = self.plan
        assert plan is not None
        try:
            infos = self.infos = await self.resolve()
        except OSError as exc:  # an unknown host: every slot stays unconnected, the level says why
            return _describe(exc)
        first_error: str | None = None
        primed: list[Slot] = []
        for start in range(0, len(slots), OPEN_GROUP):
            group = slots[start : start + OPEN_GROUP]
            at_ns = plan.open_at_ns + self.index * OPEN_STAGGER_NS if plan.open_at_ns and start == 0 else 0
            error = await self.connect_tight(group, infos, at_ns)
            first_error = first_error or (_describe(error) if error else None)
            for slot in group:
                if slot.tr is not None and self.raw:
                    slot.send()
                    primed.append(slot)
        if wait:
            await self.await_first_answers(primed)
        return first_error

    async def resolve(self) -> list[Any]:
        """The server's addresses, in getaddrinfo's order (e.g. ::1 before 127.0.0.1)."""
        plan = self.plan
        assert plan is not None
        return list(await self.loop.getaddrinfo(plan.host, plan.port, type=socket.SOCK_STREAM))

    async def connect_tight(self, slots: list[Slot], infos: list[Any], at_ns: int) -> BaseException | None:
        """Connect the slots to the first address of ``infos`` in one tight loop (at ``at_ns``
        when given); those that fail try the next address, as asyncio's own connect does (a
        name such as localhost may resolve to ::1 first while the server listens on IPv4 only).
        An address that served after the first failed moves to the front for the next groups.
        Returns the first failure when some slot stayed unconnected."""
        pending, error = slots, None
        for n, info in enumerate(list(infos)):
            pending, error = await self.connect_once(pending, info, at_ns if n == 0 else 0)
            if n and len(pending) < len(slots):
                infos.remove(info)
                infos.insert(0, info)
            if not pending:
                return None
        return error

    async def connect_once(self, slots: list[Slot], info: Any, at_ns: int) -> tuple[list[Slot], BaseException | None]:
        """One socket per slot, connected in one loop of non-blocking connects, then handed to
        asyncio; returns the slots that failed and the first failure."""
        plan = self.plan
        assert plan is not None
        loop = self.loop
        family, _, proto, _, address = info
        socks = []
        for _ in slots:
            sock = socket.socket(family, socket.SOCK_STREAM, proto)
            sock.setblocking(False)
            socks.append(sock)
        if at_ns:
            ahead = (at_ns - monotonic_ns()) / 1e9 - 0.002
            if ahead > 0:
                await asyncio.sleep(ahead)
            while monotonic_ns() < at_ns:
                pass
        codes = [sock.connect_ex(address) for sock in socks]
        first_error: BaseException | None = None
        failed: list[Slot] = []
        for slot, sock, code in zip(slots, socks, codes, strict=True):
            try:
                if code not in (0, errno.EINPROGRESS):
                    raise OSError(code, os.strerror(code))
                if code:
                    done: asyncio.Future[None] = loop.create_future()
                    loop.add_writer(sock.fileno(), _set_done, done)
                    try:
                        await asyncio.wait_for(done, plan.timeout_ns / 1e9)
                    finally:
                        loop.remove_writer(sock.fileno())
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if code:
                        raise OSError(code, os.strerror(code))
                # the factory runs within this await, so it sees this iteration's slot
                await loop.create_connection(lambda: slot, sock=sock, **_tls(plan))  # noqa: B023
            except (TimeoutError, OSError) as exc:
                sock.close()
                failed.append(slot)
                first_error = first_error or exc
        return failed, first_error

    async def open(self, slot: Slot) -> None:
        plan = self.plan
        assert plan is not None
        await asyncio.wait_for(
            self.loop.create_connection(lambda: slot, plan.host, plan.port, **_tls(plan)),
            plan.timeout_ns / 1e9,
        )

    def go(self, t0_ns: int) -> None:
        plan = self.plan
        assert plan is not None
        self.tick_buffer = TickBuffer(self.index, plan.level_index, t0_ns, plan.tick_ns, self.open_loop)
        self.running = True
        self.at(t0_ns, self.start_sending)
        self.at(t0_ns + plan.tick_ns, self.flush, 0)
        self.at(t0_ns + LAG_PROBE_NS, self.probe_lag, t0_ns + LAG_PROBE_NS)
        self.at(t0_ns, self.scan_timeouts)
        if _DIAG_STALL_NS:
            self.at(t0_ns, self.stall)

    def stall(self) -> None:
        """Fault injection (GPUSCALE_LOAD_DIAG stall_ms): keep the loop busy, as a worker
        starved by its own work would be."""
        end = monotonic_ns() + _DIAG_STALL_NS
        while monotonic_ns() < end:
            pass
        self.at(monotonic_ns() + 20_000_000, self.stall)

    def at(self, when_ns: int, callback: Any, *args: Any) -> None:
        handles = self.handles
        if len(handles) > 64:
            handles[:] = [h for h in handles if not h.cancelled() and h.when() >= self.loop.time()]
        handles.append(self.loop.call_at(when_ns / 1e9, callback, *args))

    def start_sending(self) -> None:
        plan = self.plan
        assert plan is not None and self.tick_buffer is not None
        if not self.open_loop:
            self.warming = False
            for slot in self.slots:
                if slot.tr is not None:
                    if not slot.busy:
                        self.tick_buffer.sent_one(slot.send(), False)
                    else:  # a warming request in flight: its answer counts, so it counts as sent at T0
                        self.tick_buffer.sent_one(self.tick_buffer.t0, False)
                else:
                    self.reconnect(slot, immediately=True)
        else:
            self.gap_ns = 1e9 / plan.rate
            self.next_ns = self.tick_buffer.t0 + plan.phase_ns
            self.fire()

    def stop_level(self) -> None:
        self.running = False
        self.warming = False
        self.generation += 1
        for handle in self.handles:
            handle.cancel()
        self.handles.clear()
        for task in list(self.tasks):
            task.cancel()
        for slot in self.slots:
            slot.busy = False
            slot.abort()
        self.slots = []
        self.idle = deque()
        self.open_count = 0
        self.waiting = deque()
        self.coming = 0
        self.infos = []
        self.tick_buffer = None

    # -- ticks, lag, timeouts

    def flush(self, k: int) -> None:
        tick_buffer = self.tick_buffer
        if tick_buffer is None:
            return
        ticks = tick_buffer.flush(k)
        if ticks:
            ticks[-1].in_flight = sum(1 for slot in self.slots if slot.busy)
        for tick in ticks:
            self.send_msg(("tick", tick))
        self.at(tick_buffer.t0 + (k + 2) * tick_buffer.tick_ns, self.flush, k + 1)

    def probe_lag(self, expected_ns: int) -> None:
        now = monotonic_ns()
        if self.tick_buffer is not None:
            self.tick_buffer.lag(max(0, now - expected_ns), now)
        self.at(now + LAG_PROBE_NS, self.probe_lag, now + LAG_PROBE_NS)

    def scan_timeouts(self) -> None:
        plan, tick_buffer = self.plan, self.tick_buffer
        if plan is None or tick_buffer is None:
            return
        now = monotonic_ns()
        limit = plan.timeout_ns
        for slot in self.slots:
            if slot.busy and now - slot.sent_ns > limit:
                slot.busy = False
                tick_buffer.error("timeout", f"no response within {limit / 1e9:g} s", now)
                slot.abort()  # connection_lost reconnects it
        self.at(now + TIMEOUT_SCAN_NS, self.scan_timeouts)

    # -- responses

    def completed(self, slot: Slot, head: Head, buf: bytearray, end: int) -> None:
        """A whole response is in ``buf[:end]`` (valid only during this call)."""
        now = monotonic_ns()
        slot.busy = False
        tick_buffer = self.tick_buffer
        # measurement starts at T0: a response before it (a warming request, also between the
        # "go" message and T0) is not a result, and its replacement is not a counted send
        if tick_buffer is None or slot.generation != self.generation or now < tick_buffer.t0:
            if self.warming and slot.generation == self.generation and head.status == 200 and not head.close:
                slot.send()  # before T0: keep this connection's server thread busy (open_grouped)
            return
        if head.status == 200:
            if not self.checked:
                self.checked = True
                problem = check_first_response(head, bytes(buf[:end]), self.outputs)
                if problem:
                    tick_buffer.error("bad_response", problem, now)
                    self.after(slot, head.close)
                    return
            written = slot.written_ns or now  # a response before the write ended: no wait
            first = min(max(slot.first_ns, written), now)
            # our side: the response unread in our socket, reading it, and (rate mode) sending late
            ours = max(0, min(slot.unread_ns, first - written)) + (now - first) + (slot.sent_ns - slot.intended_ns)
            tick_buffer.ok(now - slot.intended_ns, now - slot.sent_ns, now, written - slot.sent_ns, first - written, ours)
        else:
            kind = "http_4xx" if 400 <= head.status < 500 else "http_5xx" if head.status >= 500 else "bad_response"
            body = bytes(buf[head.head_len : end]) if head.content_length is not None else b""
            tick_buffer.error(kind, f"HTTP {head.status}: {error_message(body)}", now)
        self.after(slot, head.close)

    def after(self, slot: Slot, close: bool) -> None:
        """The slot is free again: send the next request (concurrency) or park it (rate)."""
        if not self.running:
            return
        if close:
            slot.abort()  # the server said Connection: close; lost() reconnects it
            return
        if not self.open_loop:
            self.tick_buffer.sent_one(slot.send(), False)  # type: ignore[union-attr]  # set while running
        else:
            self.idle.append(slot)

    def failed(self, slot: Slot, kind: str, message: str) -> None:
        """A response we cannot frame: count it and start over on a new connection."""
        if self.tick_buffer is not None and slot.busy and slot.generation == self.generation:
            self.tick_buffer.error(kind, message, monotonic_ns())
        slot.busy = False
        slot.filled = slot.need = 0
        slot.head = None
        slot.abort()

    def unexpected(self, slot: Slot, message: str) -> None:
        if self.tick_buffer is not None and slot.generation == self.generation:
            self.tick_buffer.error("bad_response", message, monotonic_ns())
        slot.abort()

    def lost(self, slot: Slot, exc: Exception | None) -> None:
        if slot.generation != self.generation:
            return
        broke = slot.busy
        if slot.busy:
            slot.busy = False
            if self.tick_buffer is not None:
                self.tick_buffer.error("connection_reset", f"connection lost: {_describe(exc)}", monotonic_ns())
        if not self.running:
            return
        if not self.open_loop:
            # a connection closed cleanly (Connection: close, idle timeout, our timeout abort)
            # comes back at once; one that broke under a request backs off
            self.reconnect(slot, immediately=not broke)
        else:
            if slot in self.idle:
                self.idle.remove(slot)
            if slot in self.slots:
                self.slots.remove(slot)
            self.open_count -= 1

    def reconnect(self, slot: Slot, immediately: bool = False) -> None:
        self.spawn(self._reconnect(slot, 0.0 if immediately else slot.backoff))

    async def _reconnect(self, slot: Slot, delay: float) -> None:
        generation = self.generation
        while self.running and generation == self.generation:
            if delay:
                await asyncio.sleep(delay)
                if not self.running or generation != self.generation:
                    return
            try:
                await self.open(slot)
            except (TimeoutError, OSError) as exc:
                if self.tick_buffer is not None:
                    self.tick_buffer.error(_connect_error_kind(exc), _describe(exc), monotonic_ns())
                slot.backoff = min(BACKOFF_MAX_S, slot.backoff * 2)
                delay = slot.backoff
                continue
            self.tick_buffer.sent_one(slot.send(), False)  # type: ignore[union-attr]  # set while running
            return

    # -- rate mode

    def next_gap(self) -> float:
        if self.plan.arrival == "poisson":  # type: ignore[union-attr]  # rate mode runs with a plan
            return self.rng.expovariate(1.0) * self.gap_ns
        return self.gap_ns

    def fire(self) -> None:
        if not self.running:
            return
        now = monotonic_ns()
        while self.next_ns <= now:
            self.dispatch(int(self.next_ns), now)
            self.next_ns += self.next_gap()
        self.at(int(self.next_ns), self.fire)

    def dispatch(self, intended: int, now: int) -> None:
        tick_buffer, plan = self.tick_buffer, self.plan
        assert tick_buffer is not None and plan is not None
        if self.idle:
            slot = self.idle.popleft()  # the longest idle: load turns over every connection
            sent = slot.send(intended)
            tick_buffer.sent_one(sent, sent - intended > LATE_SEND_NS)
        elif self.coming:
            self.coming -= 1  # a connection of a group being opened will carry it
            self.waiting.append(intended)
        elif self.open_count < plan.max_in_flight:
            size = 1 if _DIAG_RATE_COLD else OPEN_GROUP
            group = [Slot(self) for _ in range(min(size, plan.max_in_flight - self.open_count))]
            self.slots.extend(group)
            self.open_count += len(group)
            self.coming += len(group) - 1
            self.waiting.append(intended)
            self.spawn(self.open_more(group))
        else:
            tick_buffer.error("dropped", f"{plan.max_in_flight} requests already in flight (the worker's cap)", now)

    async def open_more(self, group: list[Slot]) -> None:
        """Rate mode ran out of idle connections: open a tight group of them. Each connection
        sends the oldest request waiting for one; the rest join the idle ones.

        Why (issue 13): one connection opened alone lands on Triton's first idle HTTP thread
        (open_grouped says why), and so did every connection opened during a level, until
        session 8. A latency spike near the server's capacity then fed itself: more requests in
        flight, more connections on one thread, slower reads of their bodies. Measured on 2x
        H200 at 75 % of the 2x variant's peak (docs/results/rate_mode_connections_h200.md):
        - one at a time, 112 opened before T0 (10 ms of sends): ours grew to 230-618
          connections, 92-148 of them on the busiest thread, and our p50 varied 44-138 %
          between rounds (0.96-4.49x perf_analyzer's);
        - groups, 176-192 opened before T0 (20 ms of sends, sweep.py's _Level.plans): none
          opened during the level, 43-53 on the busiest thread, our p50 varied 8-13 %, and
          read 1.06-1.07x perf_analyzer's where its client kept up (call 4)."""
        generation = self.generation
        error: BaseException | None
        try:
            if not self.infos:
                self.infos = await self.resolve()
            error = await self.connect_tight(group, self.infos, 0)
        except OSError as exc:
            error = exc
        if generation != self.generation or self.tick_buffer is None:
            return  # the level ended meanwhile: stop_level closed these slots
        connected = [slot for slot in group if slot.tr is not None]
        failed = len(group) - len(connected)
        if failed:
            for slot in group:
                # one that connected and was closed at once is already gone (lost() counted it)
                if slot.tr is None and slot in self.slots:
                    self.slots.remove(slot)
                    self.open_count -= 1
            unclaimed = min(self.coming, failed)
            self.coming -= unclaimed
            kind = _connect_error_kind(error) if error else "connect_error"
            now = monotonic_ns()
            for _ in range(failed - unclaimed):  # requests that were to go on a failed connection
                if self.waiting:
                    self.waiting.popleft()
                    self.tick_buffer.error(kind, _describe(error), now)
        for slot in connected:
            if self.waiting and self.running:
                intended = self.waiting.popleft()
                sent = slot.send(intended)
                self.tick_buffer.sent_one(sent, sent - intended > LATE_SEND_NS)
            else:
                self.idle.append(slot)

    # -- main

    async def run(self) -> None:
        self.loop.add_reader(self.conn.fileno(), self.on_control)
        self.send_msg(("hello", self.index))
        await self.done.wait()
        self.stop_level()
        self.loop.remove_reader(self.conn.fileno())


def check_first_response(head: Head, data: bytes, outputs: list[str]) -> str | None:
    """Sanity check of a level's first successful response: the outputs we asked for are
    there and the binary sizes add up. Returns a one-line problem, or None."""
    body = bytes(data[head.head_len :])
    header_len = head.inference_header_length if head.inference_header_length is not None else len(body)
    try:
        header = json.loads(body[:header_len])
    except ValueError:
        return "response inference header is not JSON"
    got = {o.get("name"): o for o in header.get("outputs", []) if isinstance(o, dict)}
    missing = [name for name in outputs if name not in got]
    if missing:
        return f"response lacks outputs {', '.join(missing)}"
    binary = sum(int((o.get("parameters") or {}).get("binary_data_size", 0)) for o in got.values())
    if binary != len(body) - header_len:
        return f"response binary size {len(body) - header_len} != declared {binary}"
    return None


class PreciseEpollSelector(selectors.EpollSelector):
    """epoll, woken on time to the microsecond instead of the millisecond.

    epoll_wait takes its timeout in whole milliseconds (Python rounds up), so every asyncio
    timer fires up to 1 ms late: a request-rate schedule would send most requests late and the
    corrected latency would carry that error. An epoll fd is itself pollable: wait on it with
    select(), whose timeout has microsecond resolution, then collect the events without waiting.
    On only in request-rate mode: the extra syscall cost ~10 % more CPU per request in
    concurrency mode (measured: 61 vs 55 us), where no timer is on the measurement's path.
    """

    precise = False
    # When the loop last asked the kernel for events, and when the kernel answered: a response
    # read in a callback after ``returned`` either arrived while select() waited (it woke the
    # loop: it waited in our socket since about ``returned``), or, when select() found events
    # at once, at some time after the previous answer (the loop was busy: up to ``now -
    # previous``). Two clock reads per loop iteration, none per request.
    entered = 0
    returned = 0
    previous = 0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.previous = self.returned
        self.entered = monotonic_ns()
        if self.precise and timeout is not None and timeout > 0:
            select.select([self._selector.fileno()], [], [], timeout)  # type: ignore[attr-defined]  # EpollSelector's private epoll object
            timeout = 0
        events = super().select(timeout)
        self.returned = monotonic_ns()
        return events

    def unread_since(self) -> int:
        """Earliest time a response read now may have been waiting in our socket."""
        if self.returned - self.entered > SELECT_WAITED_NS:
            return self.returned
        return self.previous or self.returned


def new_event_loop(selector: PreciseEpollSelector) -> asyncio.AbstractEventLoop:
    """The worker's loop: asyncio's selector loop on a precise epoll (not uvloop: its timers
    have millisecond resolution, the very error PreciseEpollSelector removes)."""
    return asyncio.SelectorEventLoop(selector)


_SSL = None


def _ssl_context() -> Any:
    global _SSL
    if _SSL is None:
        import ssl

        _SSL = ssl.create_default_context()
    return _SSL


def _tls(plan: LevelPlan) -> dict[str, Any]:
    """create_connection's TLS arguments for the plan's server (none for http)."""
    return {"ssl": _ssl_context(), "server_hostname": plan.server_hostname} if plan.tls else {}


def main(argv: list[str]) -> int:
    # Ctrl-C, a hang-up (SSH drop, closed terminal) and `timeout`'s SIGTERM reach the whole process
    # group: the session decides when workers stop, and a worker ends anyway when the session's end
    # of its socket closes (the session died)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    fd, index = int(argv[1]), int(argv[2])
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    conn = Connection(sock.detach())

    selector = PreciseEpollSelector()

    async def run() -> None:
        await Worker(index, conn, selector).run()

    loop = new_event_loop(selector)
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(run())
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
