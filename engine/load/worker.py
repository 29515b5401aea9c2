"""A load worker process: the scheduler of one share of a level's load, on one event loop.

Run as ``python -m engine.load.worker <fd> <index>``: ``fd`` is this end of a socket pair with
the session, which sends the typed commands of engine/load/worker_messages.py (UseTransport,
PrepareLevel, StartAt, StopLevel, Exit) and receives Hello, Ready, TickReport, Stopped or Fatal.

The scheduler owns levels, ticks, how many connections are open and when, and the clock; the
sweep's transport (engine/net/connection.py) owns the wire. Hot path, per answer: the
connection's read callback frames it and calls ``answered``, which records the latency into the
current tick and, in concurrency mode, sends the next request on the same connection. Only the
standard library and small modules of ours are imported here (no numpy: a worker starts in tens
of milliseconds of CPU, not hundreds).
"""

from __future__ import annotations

import asyncio
import random
import select
import selectors
import signal
import socket
import sys
import time
from array import array
from collections import deque
from collections.abc import Callable, Coroutine
from importlib import import_module
from multiprocessing.connection import Connection as Pipe
from typing import Any

from engine.load.arrivals import TraceGaps, gap_factor
from engine.load.dev import STALL_EVERY_NS, LoadDev
from engine.load.ticks import LATE_SEND_NS, MESSAGES_PER_KIND, LevelPlan, Tick
from engine.load.worker_messages import (
    Exit,
    Fatal,
    FromWorker,
    Hello,
    PrepareLevel,
    Ready,
    StartAt,
    StopLevel,
    Stopped,
    TickReport,
    ToWorker,
    UseTransport,
)
from engine.modes import mode_of
from engine.net.connection import (
    BAD_RESPONSE,
    CONNECT_ERROR,
    CONNECTION_RESET,
    DROPPED,
    TIMEOUT,
    Connection,
    Dialer,
    connect_error_kind,
    describe,
    first_line,
)

monotonic_ns = time.monotonic_ns  # CLOCK_MONOTONIC: shared with the session's T0
LAG_PROBE_NS = 10_000_000  # how often the loop-lag probe asks to run
TIMEOUT_SCAN_NS = 50_000_000
SELECT_WAITED_NS = 50_000  # select() that took longer than this waited for the kernel
BACKOFF_MIN_S = 0.01
BACKOFF_MAX_S = 0.5
OPEN_GROUP = 8  # connections per tight group of connects (open_grouped says why)
OPEN_STAGGER_NS = 3_000_000  # worker w opens its first group w x this after the level's common instant


HAVE_SCHEDSTAT = sys.platform == "linux"  # /proc/self/schedstat: Linux's scheduler statistics


def run_queue_wait_ns() -> int | None:
    """Nanoseconds this (single-threaded) worker has spent runnable but not running: the CPU
    contention it suffered. Linux /proc/self/schedstat; None where there is none."""
    if not HAVE_SCHEDSTAT:
        return None
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
        self.ttft: list[int] = []
        self.responses: list[int] = []
        self.tokens: list[int] = []
        self.decode: list[int] = []
        self.itl: list[int] = []
        self.reads: list[int] = []
        self.input_tokens: list[int] = []
        self.cached_tokens: list[int] = []
        self.worded = 0
        self.first: list[int] = []
        self.sequences = 0

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
        if self.responses:
            tick = self.closed[self.index]
            tick.ttft_ns, tick.responses = array("q", self.ttft), array("q", self.responses)
            tick.decode_ns, tick.itl_ns = array("q", self.decode), array("q", self.itl)
            tick.tokens, tick.reads = array("q", self.tokens), array("q", self.reads)
            tick.input_tokens, tick.worded = array("q", self.input_tokens), self.worded
            tick.cached_tokens = array("q", self.cached_tokens)
        if self.first:
            tick = self.closed[self.index]
            tick.first_step, tick.sequences = array("q", self.first), self.sequences

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

    def streamed(self, ttft: int, gaps: list[int], responses: int, decode: int, tokens: int, reads: int,
                 input_tokens: int = -1, worded: bool = False, cached_tokens: int = -1) -> None:
        """The stream of the request ``ok`` just counted (same tick)."""
        self.input_tokens.append(input_tokens)
        self.cached_tokens.append(cached_tokens)
        self.worded += worded
        self.ttft.append(ttft)
        self.reads.append(reads)
        self.itl.extend(gaps)
        self.responses.append(responses)
        self.tokens.append(tokens)
        self.decode.append(decode)

    def stepped(self, first: bool, ended: bool) -> None:
        """The sequence step of the request ``ok`` just counted (same tick)."""
        self.first.append(first)
        self.sequences += ended

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


class Worker:
    """The scheduler of one load worker (transport.Scheduler): its connections' callbacks land
    in ``answered``, ``rejected``, ``failed``, ``unexpected`` and ``lost``."""

    def __init__(self, index: int, conn: Pipe, selector: PreciseEpollSelector | None = None) -> None:
        self.index = index
        self.selector = selector
        self.conn = conn
        self.loop = asyncio.get_running_loop()
        self.loop.set_exception_handler(self._loop_error)
        self.dialer: Dialer | None = None  # the sweep's transport, for this worker (UseTransport)
        self.dev = LoadDev()
        self.plan: LevelPlan | None = None
        self.tick_buffer: TickBuffer | None = None
        self.running = False  # between StartAt and StopLevel: requests may be sent
        self.warming = False  # while a level's connections open: those open keep busy (open_grouped)
        self.open_loop = False  # the level's mode sends on a schedule (rate), not on each answer
        self.generation = 0  # bumps per level so that late callbacks of an old level are ignored
        self.slots: list[Connection] = []
        self.idle: deque[Connection] = deque()
        self.open_count = 0
        # rate mode, when every connection is busy: intended send times waiting for a group of
        # connections being opened (open_more), and how many of those no request has claimed yet
        self.waiting: deque[int] = deque()
        self.coming = 0
        self.checked = False
        self.handles: list[asyncio.TimerHandle] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.done = asyncio.Event()
        self.rng = random.Random()
        self.trace_walk = TraceGaps((), 0)  # arrival "trace": this worker's walk along the trace's gaps
        self.next_ns = 0.0  # rate mode: when the next request is due (fractional ns add up)
        self.gap_ns = 0.0

    # -- control channel

    def send_msg(self, msg: FromWorker) -> None:
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

    def handle(self, msg: ToWorker) -> None:
        if isinstance(msg, UseTransport):
            self.take_transport(import_module(msg.module).TRANSPORT.dialer(self, msg.payload), msg.dev)
        elif isinstance(msg, PrepareLevel):
            self.stop_level()
            self.spawn(self.prepare(msg.plan))
        elif isinstance(msg, StartAt):
            self.start_at(msg.t0_ns)
        elif isinstance(msg, StopLevel):
            self.stop_level()
            self.send_msg(Stopped(self.plan.level_index if self.plan else -1))
        elif isinstance(msg, Exit):
            self.stop_level()
            self.done.set()

    def take_transport(self, dialer: Dialer, dev: LoadDev | None = None) -> None:
        """The sweep's transport and developer settings (its UseTransport message)."""
        self.dialer = dialer
        self.dev = dev or LoadDev()

    def spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.fatal(task.exception())  # type: ignore[arg-type]  # not None: checked

    def fatal(self, exc: BaseException) -> None:
        """The worker's own error, reported as itself (its type and first line), never left to
        read as a worker that stopped answering."""
        self.send_msg(Fatal(f"load worker {self.index}: {first_line(exc)}"))

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """An exception in a callback (a timer's, a connection's) would else only be logged."""
        exc = context.get("exception")
        if isinstance(exc, Exception):
            self.fatal(exc)
        else:
            loop.default_exception_handler(context)

    def new_connections(self, count: int) -> list[Connection]:
        dialer = self.dialer
        assert dialer is not None, "a level before the sweep's transport"
        return [dialer.connection() for _ in range(count)]

    # -- level lifecycle

    async def prepare(self, plan: LevelPlan) -> None:
        self.plan = plan
        # the mode's strategy, read once per level: the per-answer paths test this flag
        self.open_loop = mode_of(plan.mode).open_loop
        if self.selector is not None:
            self.selector.precise = self.open_loop  # sends on schedule need timers on time
        self.generation += 1
        self.checked = False
        self.rng = random.Random(plan.seed)
        self.trace_walk = TraceGaps(plan.trace, plan.trace_start)
        count = plan.preopen if self.open_loop else plan.slots
        self.slots = self.new_connections(count)
        self.open_count = len(self.slots)
        if self.dev.open_burst:
            first_error = await self.open_burst(self.slots)
        else:
            # the connections opened first carry load while the next are opened (open_grouped);
            # in concurrency mode until T0, in rate mode until the last group is connected
            self.warming = True
            first_error = await self.open_grouped(self.slots, wait=self.open_loop)
        connected = sum(1 for s in self.slots if s.connected)
        if self.open_loop:
            self.idle = deque(s for s in self.slots if s.connected)
            self.slots = list(self.idle)
            self.open_count = len(self.slots)
        connect_ns, kernel_rtt_us = self.dialer.path_figures() if self.dialer is not None else ([], [])
        self.send_msg(Ready(plan.level_index, connected, first_error, connect_ns, kernel_rtt_us))

    async def await_first_answers(self, primed: list[Connection]) -> None:
        """Rate mode: every connection is open, so stop warming; the level is ready when the
        requests in flight are answered (the schedule starts with every connection idle); a
        connection with no answer by the timeout starts afresh."""
        self.warming = False
        deadline = monotonic_ns() + (self.plan.timeout_ns if self.plan else 10**10)
        while any(s.busy for s in primed) and monotonic_ns() < deadline:
            await asyncio.sleep(0.002)
        for slot in primed:
            if slot.busy:
                slot.busy = False
                slot.abort()

    async def open_grouped(self, slots: list[Connection], wait: bool) -> str | None:
        """Open the level's connections in tight groups of OPEN_GROUP, each group's first
        (unmeasured) requests sent while the next group connects; worker w's first group at the
        plan's common instant (LevelPlan.open_at_ns) plus w x OPEN_STAGGER_NS. The open
        connections keep sending (``warming``): in concurrency mode (``wait`` False) until T0;
        in rate mode until the last group is connected, and then their answers are awaited
        before the level is ready.

        Why: Triton's HTTP front end hands each new connection, for good, to its first thread
        that is neither running a request handler nor has a connection waiting; connections
        that arrive apart pile onto one thread, which then caps the server. A few that arrive
        together, while earlier ones carry load, spread; many at once crowd again. What each
        way of opening measured: docs/results/load_engine_design_notes.md.
        """
        plan, dialer = self.plan, self.dialer
        assert plan is not None and dialer is not None
        first_error: str | None = None
        primed: list[Connection] = []
        for start in range(0, len(slots), OPEN_GROUP):
            group = slots[start : start + OPEN_GROUP]
            at_ns = plan.open_at_ns + self.index * OPEN_STAGGER_NS if plan.open_at_ns and start == 0 else 0
            error = await dialer.open(group, at_ns)
            first_error = first_error or (describe(error) if error else None)
            for slot in group:
                if slot.connected:
                    slot.send()
                    primed.append(slot)
        if wait:
            await self.await_first_answers(primed)
        return first_error

    async def open_burst(self, slots: list[Connection]) -> str | None:
        """Developer setting open_burst: every connection at once, one open each, none sending
        before T0 (the way that lost: open_grouped says why)."""
        dialer = self.dialer
        assert dialer is not None
        errors = await asyncio.gather(*(dialer.open([slot], 0) for slot in slots))
        return next((describe(e) for e in errors if e is not None), None)

    def start_at(self, t0_ns: int) -> None:
        """The level's clock: sending starts at T0, ticks are flushed, the loop's lag and the
        requests' timeouts are watched from then on."""
        plan = self.plan
        assert plan is not None
        self.tick_buffer = TickBuffer(self.index, plan.level_index, t0_ns, plan.tick_ns, self.open_loop)
        self.running = True
        self.schedule(t0_ns, self.start_sending)
        self.schedule(t0_ns + plan.tick_ns, self.flush, 0)
        self.schedule(t0_ns + LAG_PROBE_NS, self.probe_lag, t0_ns + LAG_PROBE_NS)
        self.schedule(t0_ns, self.scan_timeouts)
        if self.dev.stall_ms:
            self.schedule(t0_ns, self.stall)

    def stall(self) -> None:
        """Developer setting stall_ms: keep the loop busy, as a worker starved by its own work
        would be."""
        end = monotonic_ns() + self.dev.stall_ms * 1_000_000
        while monotonic_ns() < end:
            pass
        self.schedule(monotonic_ns() + STALL_EVERY_NS, self.stall)

    def schedule(self, when_ns: int, callback: Callable[..., object], *args: object) -> None:
        """Call ``callback(*args)`` at ``when_ns`` (CLOCK_MONOTONIC); cancelled when the level stops."""
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
                if slot.connected:
                    if not slot.busy:
                        self.tick_buffer.sent_one(slot.send(), False)
                    else:  # a warming request in flight: its answer counts, so it counts as sent at T0
                        self.tick_buffer.sent_one(self.tick_buffer.t0, False)
                else:
                    self.reconnect(slot, immediately=True)
        else:
            self.gap_ns = 1e9 / plan.rate
            self.next_ns = self.tick_buffer.t0 + plan.phase_ns
            self.send_due()

    def stop_level(self) -> None:
        self.running = False
        self.warming = False
        self.generation += 1
        for handle in self.handles:
            handle.cancel()
        self.handles.clear()
        for task in list(self.tasks):
            task.cancel()
        if self.dialer is not None:
            self.dialer.level_ends()
        for slot in self.slots:
            slot.busy = False
            slot.abort()
        self.slots = []
        self.idle = deque()
        self.open_count = 0
        self.waiting = deque()
        self.coming = 0
        if self.dialer is not None:
            self.dialer.forget()
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
            self.send_msg(TickReport(tick))
        self.schedule(tick_buffer.t0 + (k + 2) * tick_buffer.tick_ns, self.flush, k + 1)

    def probe_lag(self, expected_ns: int) -> None:
        now = monotonic_ns()
        if self.tick_buffer is not None:
            self.tick_buffer.lag(max(0, now - expected_ns), now)
        self.schedule(now + LAG_PROBE_NS, self.probe_lag, now + LAG_PROBE_NS)

    def scan_timeouts(self) -> None:
        plan, tick_buffer = self.plan, self.tick_buffer
        if plan is None or tick_buffer is None:
            return
        now = monotonic_ns()
        limit = plan.timeout_ns
        for slot in self.slots:
            if slot.busy and now - slot.sent_ns > limit:
                slot.busy = False
                tick_buffer.error(TIMEOUT, f"no response within {limit / 1e9:g} s", now)
                slot.abort()  # lost() reconnects it
        self.schedule(now + TIMEOUT_SCAN_NS, self.scan_timeouts)

    # -- answers (the transport's callbacks: engine/net/connection.py, Scheduler)

    def answered(self, slot: Connection, close: bool) -> None:
        """A successful answer to the request in flight on ``slot``."""
        now = monotonic_ns()
        slot.busy = False
        tick_buffer = self.tick_buffer
        # measurement starts at T0: an answer before it (a warming request, also between the
        # StartAt message and T0) is not a result, and its replacement is not a counted send
        if tick_buffer is None or slot.generation != self.generation or now < tick_buffer.t0:
            if self.warming and slot.generation == self.generation and not close and slot.connected:
                slot.send()  # before T0: keep this connection's server thread busy (open_grouped)
            return
        if not self.checked:
            self.checked = True
            problem = slot.check()
            if problem:
                tick_buffer.error(BAD_RESPONSE, problem, now)
                self.after(slot, close)
                return
        written = slot.written_ns or now  # an answer before the write ended: no wait
        first = min(max(slot.first_ns, written), now)
        # our side: the answer unread in our socket, reading it, the protocol library's own part of
        # the send (gRPC), and (rate mode) sending late
        ours = (max(0, min(slot.unread_ns, first - written)) + (now - first) + slot.own_ns
                + (slot.sent_ns - slot.intended_ns))
        tick_buffer.ok(now - slot.intended_ns, now - slot.sent_ns, now, written - slot.sent_ns, first - written, ours)
        stream = slot.stream
        if stream is not None:
            tick_buffer.streamed(stream.first_ns - slot.intended_ns, stream.gaps_ns, stream.responses,
                                 now - stream.first_ns, stream.tokens, stream.reads, stream.input_tokens, stream.worded,
                                 stream.cached_tokens)
        if slot.step >= 0:
            tick_buffer.stepped(slot.step == 0, slot.ends_sequence)
        self.after(slot, close)

    def rejected(self, slot: Connection, kind: str, message: str, close: bool) -> None:
        """An error answer (the server refused or failed the request): counted by ``kind``."""
        now = monotonic_ns()
        slot.busy = False
        tick_buffer = self.tick_buffer
        if tick_buffer is None or slot.generation != self.generation or now < tick_buffer.t0:
            return
        tick_buffer.error(kind, message, now)
        self.after(slot, close)

    def after(self, slot: Connection, close: bool) -> None:
        """The connection is free again: send the next request (concurrency) or park it (rate)."""
        if not self.running:
            return
        if close:
            slot.abort()  # the server closes it after this answer; lost() reconnects it
            return
        if not slot.connected:  # lost under the answer (a close it crossed): reopened, then it sends
            if not self.open_loop:
                self.reconnect(slot, immediately=True)
            return
        if not self.open_loop:
            think = self.plan.think_ns if self.plan is not None else 0
            if think:  # the user reads the answer before the next request (load.think_time_s)
                self.schedule(monotonic_ns() + think, self._thought, slot, self.generation)
            else:
                self.tick_buffer.sent_one(slot.send(), False)  # type: ignore[union-attr]  # set while running
        else:
            self.idle.append(slot)

    def _thought(self, slot: Connection, generation: int) -> None:
        """A user's think time is over: the next request, if its connection is still there to send on."""
        if self.running and generation == self.generation and slot.connected and not slot.busy:
            self.tick_buffer.sent_one(slot.send(), False)  # type: ignore[union-attr]  # set while running

    def failed(self, slot: Connection, kind: str, message: str) -> None:
        """An answer the transport cannot read: count it and start over on a new connection."""
        if self.tick_buffer is not None and slot.busy and slot.generation == self.generation:
            self.tick_buffer.error(kind, message, monotonic_ns())
        slot.busy = False
        slot.abort()

    def unexpected(self, slot: Connection, message: str) -> None:
        if self.tick_buffer is not None and slot.generation == self.generation:
            self.tick_buffer.error(BAD_RESPONSE, message, monotonic_ns())
        slot.abort()

    def lost(self, slot: Connection, exc: BaseException | None) -> None:
        if slot.generation != self.generation:
            return
        again = slot.resend and not self.open_loop  # closed loop: the next send on the fresh connection replaces it
        slot.resend = False
        broke = slot.busy and not again
        if slot.busy:
            slot.busy = False
            if self.tick_buffer is not None and not again:
                self.tick_buffer.error(CONNECTION_RESET, f"connection lost: {describe(exc)}", monotonic_ns())
        if not self.running:
            return
        if not self.open_loop:
            # a connection closed cleanly (the server's close, idle timeout, our timeout abort)
            # comes back at once (after the user's think time); one that broke under a request backs off
            think_s = (self.plan.think_ns if self.plan is not None else 0) / 1e9
            self.reconnect(slot, immediately=not broke, delay=think_s if not broke else None)
        else:
            if slot in self.idle:
                self.idle.remove(slot)
            if slot in self.slots:
                self.slots.remove(slot)
            self.open_count -= 1

    def reconnect(self, slot: Connection, immediately: bool = False, delay: float | None = None) -> None:
        # one task per connection: a connection lost again while its task opens it (the server
        # closed it at once) is that task's to retry, and a second task would open a second
        # socket onto the same connection
        if slot.reconnecting:
            return
        slot.reconnecting = True
        if delay is None:
            delay = 0.0 if immediately else max(BACKOFF_MIN_S, slot.backoff)
        self.spawn(self._reconnect(slot, delay))

    async def _reconnect(self, slot: Connection, delay: float) -> None:
        try:
            await self._reopen(slot, delay)
        finally:
            slot.reconnecting = False

    async def _reopen(self, slot: Connection, delay: float) -> None:
        generation = self.generation
        dialer = self.dialer
        assert dialer is not None
        while self.running and generation == self.generation:
            if delay:
                await asyncio.sleep(delay)
                if not self.running or generation != self.generation:
                    return
            error = await dialer.open([slot], 0)
            if not slot.connected:
                if self.tick_buffer is not None and generation == self.generation:
                    self.tick_buffer.error(connect_error_kind(error), describe(error), monotonic_ns())
                slot.backoff = delay = min(BACKOFF_MAX_S, max(BACKOFF_MIN_S, slot.backoff) * 2)
                continue
            slot.backoff = 0.0
            if not self.running or generation != self.generation:
                slot.abort()  # the level ended while it connected
                return
            self.tick_buffer.sent_one(slot.send(), False)  # type: ignore[union-attr]  # set while running
            return

    # -- rate mode

    def next_gap(self) -> float:
        plan = self.plan
        assert plan is not None  # rate mode runs with a plan
        if plan.arrival == "trace":
            return self.trace_walk.take() * self.gap_ns
        return gap_factor(self.rng, plan.arrival, plan.burstiness) * self.gap_ns

    def send_due(self) -> None:
        """Rate mode: send every request whose time has come, then wake at the next one's."""
        if not self.running:
            return
        now = monotonic_ns()
        while self.next_ns <= now:
            self.dispatch(int(self.next_ns), now)
            self.next_ns += self.next_gap()
        self.schedule(int(self.next_ns), self.send_due)

    def dispatch(self, intended: int, now: int) -> None:
        tick_buffer, plan = self.tick_buffer, self.plan
        assert tick_buffer is not None and plan is not None
        while self.idle and not self.idle[0].connected:  # lost while parked: lost() keeps the count
            self.idle.popleft()
        if self.idle:
            slot = self.idle.popleft()  # the longest idle: load turns over every connection
            sent = slot.send(intended)
            tick_buffer.sent_one(sent, sent - intended > LATE_SEND_NS)
        elif self.coming:
            self.coming -= 1  # a connection of a group being opened will carry it
            self.waiting.append(intended)
        elif self.open_count < plan.max_in_flight:
            group = self.new_connections(min(OPEN_GROUP, plan.max_in_flight - self.open_count))
            self.slots.extend(group)
            self.open_count += len(group)
            self.coming += len(group) - 1
            self.waiting.append(intended)
            self.spawn(self.open_more(group))
        else:
            tick_buffer.error(DROPPED, f"{plan.max_in_flight} requests already in flight (the worker's cap)", now)

    async def open_more(self, group: list[Connection]) -> None:
        """Rate mode ran out of idle connections: open a tight group of them (one alone would
        land on a busy server thread: open_grouped). Each connection sends the oldest request
        waiting for one; the rest join the idle ones."""
        generation = self.generation
        assert self.dialer is not None
        error = await self.dialer.open(group, 0)
        if generation != self.generation or self.tick_buffer is None:
            return  # the level ended meanwhile: stop_level closed these connections
        connected = [slot for slot in group if slot.connected]
        failed = len(group) - len(connected)
        if failed:
            for slot in group:
                # one that connected and was closed at once is already gone (lost() counted it)
                if not slot.connected and slot in self.slots:
                    self.slots.remove(slot)
                    self.open_count -= 1
            unclaimed = min(self.coming, failed)
            self.coming -= unclaimed
            kind = connect_error_kind(error) if error else CONNECT_ERROR
            now = monotonic_ns()
            for _ in range(failed - unclaimed):  # requests that were to go on a failed connection
                if self.waiting:
                    self.waiting.popleft()
                    self.tick_buffer.error(kind, describe(error), now)
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
        self.send_msg(Hello(self.index))
        await self.done.wait()
        self.stop_level()
        if self.dialer is not None:
            await self.dialer.settle()
        self.loop.remove_reader(self.conn.fileno())


# epoll is Linux's. Elsewhere (macOS) the platform's selector, kqueue, whose timeout already has
# nanosecond resolution: the select() below is then never used (``precise`` stays off).
if sys.platform == "linux":
    HAVE_EPOLL = True
    _Selector = selectors.EpollSelector
else:
    HAVE_EPOLL = False
    _Selector = selectors.DefaultSelector


class PreciseEpollSelector(_Selector):
    """epoll, woken on time to the microsecond instead of the millisecond.

    epoll_wait takes its timeout in whole milliseconds (Python rounds up), so every asyncio
    timer fires up to 1 ms late: a request-rate schedule would send most requests late and the
    corrected latency would carry that error. An epoll fd is itself pollable: wait on it with
    select(), whose timeout has microsecond resolution, then collect the events without waiting.
    On only in request-rate mode: the extra syscall costs CPU per request in concurrency mode,
    where no timer is on the measurement's path (docs/results/load_engine_design_notes.md).
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
        if self.precise and HAVE_EPOLL and timeout is not None and timeout > 0:
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


def main(argv: list[str]) -> int:
    # Ctrl-C, a hang-up (SSH drop, closed terminal) and `timeout`'s SIGTERM reach the whole process
    # group: the session decides when workers stop, and a worker ends anyway when the session's end
    # of its socket closes (the session died)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    fd, index = int(argv[1]), int(argv[2])
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    conn = Pipe(sock.detach())

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
