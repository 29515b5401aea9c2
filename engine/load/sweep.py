"""A sweep: every level of the profile's load, one after another, measured like perf_analyzer.

For each level the session starts the load workers on a common instant T0 (CLOCK_MONOTONIC),
collects their per-tick aggregates, assembles contiguous windows (requests attributed by
completion time), reads the server's statistics at window boundaries (where its API has them),
and stops the level when the last ``stable_windows`` windows agree, after ``max_windows``, when a
whole window failed, or when asked to stop. Everything goes out as events.

Statuses: "stable" (the last stable_windows windows agree), "unstable" (max_windows reached
without that: the last stable_windows windows are merged and the level says so), "contended"
(other processes took more than load.contended_percent of the usable cores over the merged
windows: engine/cpu_share.py measures each window), "failed" (a
whole window completed no request successfully, more requests failed than succeeded over the
measured windows, or some answer was malformed, wrong or too large:
every window is merged), "interrupted" (stop was asked before the level was decided).
Error kinds counted per window (engine/net/connection.py): connection_refused, connect_error,
connection_reset, timeout, rejected and server_error (the server's answer, with its message and
the protocol's status), bad_response (an answer that cannot be framed), malformed_answer (a framed
answer that is not the one asked for: engine/triton/answer_check.py), wrong_answer (an answer whose
values differ from the input data's validation_data), response_too_large (past the
sweep's cap on an answer's size), dropped (rate mode: the in-flight cap was reached, the request was never
sent). The server is reached through its API (engine/load/server_api.py: the requests, the
transport, the statistics, the probes; Triton's is engine/triton/api.py).

A level that is unstable, contended or out of line with the level below it is measured again
(engine/load/trials.py): every trial is published, and the last one stands.

A target with several endpoints (servers) spreads each level over them (engine/load/spread.py):
each worker sends to one, and the level's result gives each endpoint's figures and errors too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import msgspec

from engine.analysis.answer import is_sound
from engine.analysis.contention import CONTENDED, is_contended, mean_share
from engine.analysis.percentiles import latency_stats
from engine.analysis.sane_values import gave_up
from engine.analysis.saturation import saturation_point
from engine.analysis.stability import is_stable
from engine.analysis.stream_split import unsplit
from engine.cpu_share import CpuReading, CpuShare, read_cpu, share_between
from engine.errors import UserError
from engine.events import (
    EndpointResult,
    Error,
    Event,
    LatencyStats,
    LevelResult,
    LevelStarted,
    LevelStatus,
    NetworkPath,
    PhaseChanged,
    ServerBreakdown,
    ServerCache,
    SweepFinished,
    Warning,
    WindowResult,
)
from engine.hostinfo import process_cores
from engine.load.arrivals import trace_gaps, trace_rate
from engine.load.audit import client_audit, delay_limit
from engine.load.cache_reads import BEFORE, CacheReads
from engine.load.dev import LoadDev
from engine.load.error_text import errors_line
from engine.load.pool import WorkerGone, WorkerPool
from engine.load.server_api import Endpoint, ServerApi
from engine.load.spread import connections_per_worker, endpoint_of_worker, workers_multiple
from engine.load.ticks import TICK_NS, LevelPlan, Tick
from engine.load.trials import Trials, local_servers
from engine.load.windows import (
    Aggregate,
    aggregate,
    merge,
    sequence_stats,
    stream_stats,
    window_end,
)
from engine.load.worker_messages import (
    PrepareLevel,
    Ready,
    StartAt,
    StopLevel,
    Stopped,
    TickReport,
    UseTransport,
)
from engine.load.workers_rule import pool_size, workers_for_level
from engine.modes import mode_of
from engine.net.connection import (
    BAD_RESPONSE,
    CONNECTION_REFUSED,
    CONNECTION_RESET,
    DROPPED,
    MALFORMED_ANSWER,
    RESPONSE_TOO_LARGE,
    SEQUENCE_DROPPED,
    TIMEOUT,
    WRONG_ANSWER,
    first_request,
)
from engine.profiles import MAX_IN_FLIGHT, Load, redact_url

Publish = Callable[[Event], None]
# any of these fails the level (a sequence Triton dropped: its later steps measured a restarted sequence)
BAD_ANSWER_KINDS = (MALFORMED_ANSWER, WRONG_ANSWER, RESPONSE_TOO_LARGE, SEQUENCE_DROPPED)
T0_LEAD_NS = 50_000_000  # time for StartAt to reach every worker before T0
TICK_SLACK_S = 10.0  # a worker whose tick is this late is considered stuck
STATS_TIMEOUT_S = 2.0
OPEN_LEAD_NS = 50_000_000  # plans reach the workers well within this


@dataclass
class _Window:
    agg: Aggregate
    latency: LatencyStats
    server: ServerBreakdown | None
    throughput_rps: float
    parts: list[Aggregate] | None = None  # several endpoints: each one's share of the window
    cpu: CpuShare | None = None  # who took the CPU over the window (engine/cpu_share.py)
    cache: ServerCache | None = None  # an LLM server's cache over the window (engine/load/cache_reads.py)


Snapshots = tuple[object | None, ...]  # one per endpoint (the server API's statistics)


@dataclass(frozen=True)
class HostShare:
    """How a sweep runs as one host's share of a sweep driven from several (engine/multihost/).

    ``start_at(level_index)``: the instant (CLOCK_MONOTONIC ns) the level starts on every host,
    awaited once the workers are ready. ``server_stats``: read Triton's statistics (the head
    only). Every window keeps its latency histogram, which the head merges."""

    start_at: Callable[[int], Awaitable[int]]
    server_stats: bool = True


class SweepStop(asyncio.Event):
    """Set to stop the sweep. ``fail(why)`` stops it as a failure (the server died), not a
    request: the level it cuts short is then "failed", with ``why`` as its first message."""

    def __init__(self) -> None:
        super().__init__()
        self.failure: str | None = None

    def fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = why
        self.set()


def failed_by(stop: asyncio.Event, result: LevelResult) -> LevelResult:
    """A level cut short or failed after the sweep was stopped as a failure names that failure."""
    failure = stop.failure if isinstance(stop, SweepStop) else None
    if failure is None or result.status not in ("interrupted", "failed"):
        return result
    return msgspec.structs.replace(result, status="failed", error_messages=[failure, *result.error_messages])


def _interleave(total: int, parts: int) -> list[int]:
    """Split ``total`` into ``parts`` integers that differ by at most one and sum to it."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def tick_for(window_ms: int) -> int:
    """Tick length: 250 ms, or a quarter of a shorter window (whole ms, at least 10 ms), so that
    a window is a whole number of ticks and its length is what the profile asks for."""
    quarter_ms = max(10, window_ms // 4)
    return min(TICK_NS, quarter_ms * 1_000_000)


@dataclass(frozen=True)
class SweepContext:
    """What every level of one sweep shares, made once per sweep (``of``): the workers, the server
    API and its endpoints, the profile's load section, where events go, and the figures that do
    not change between levels."""

    pool: WorkerPool
    api: ServerApi
    load: Load
    publish: Publish
    stop: asyncio.Event
    tick_ns: int = TICK_NS
    request_bytes: int = 0
    cpu_roots: list[int] = field(default_factory=list)  # a local server's processes, beside our own tree
    share: HostShare | None = None
    endpoints: list[Endpoint] = field(default_factory=list)
    rate_mode: bool = False
    delay_limit: float = 0.0  # how much of the latency our side may add (engine/load/audit.py)
    cpu_cores: int = 1
    trace: tuple[float, ...] = ()  # load.arrival = "trace": the trace's gaps over their mean

    @classmethod
    def of(cls, pool: WorkerPool, api: ServerApi, load: Load, publish: Publish, stop: asyncio.Event,
           tick_ns: int = TICK_NS, request_bytes: int = 0, cpu_roots: list[int] | None = None,
           share: HostShare | None = None, trace: tuple[float, ...] = ()) -> SweepContext:
        return cls(pool, api, load, publish, stop, tick_ns, request_bytes, cpu_roots or [], share,
                   endpoints=list(api.endpoints()), rate_mode=mode_of(load.mode).open_loop,
                   delay_limit=delay_limit(load.transport), cpu_cores=process_cores(), trace=trace)


class _Level:
    """One level of a sweep, from plans to its LevelResult."""

    def __init__(self, ctx: SweepContext, level: float, index: int, total: int, slo_search: bool = False,
                 trial: int = 1, earlier_levels: int = 0) -> None:
        self.ctx = ctx
        self.trace = ctx.trace  # load.arrival = "trace": the trace's gaps over their mean
        # the LLM server's cache: read by the host that reads the server's statistics
        reads_server = ctx.share is None or ctx.share.server_stats
        self.cache = CacheReads(ctx.api.cache if reads_server else None, earlier_levels,
                                lambda boundary: self.t0 + boundary * ctx.tick_ns)
        self.late_cache_said = False
        self.slo_search = slo_search
        self.trial = trial
        self.cpu_mark: CpuReading | None = None  # the reading at the current window's start
        self.level, self.index, self.total = level, index, total
        load, tick_ns = ctx.load, ctx.tick_ns
        # every endpoint gets as many workers (pool.count is a multiple of the endpoints)
        self.active = workers_multiple(workers_for_level(load, level, ctx.pool.count, ctx.request_bytes),
                                       len(ctx.endpoints), ctx.pool.count)
        self.slots: list[int] = []  # concurrency mode: each worker's connections
        self.min_ticks = max(1, math.ceil(load.window_ms * 1e6 / tick_ns))
        # a window waits for min_window_requests at most until every request that was in
        # flight when it reached its nominal length has either completed or timed out
        self.max_ticks = self.min_ticks + math.ceil(load.request_timeout_s * 1e9 / tick_ns) + 1
        self.warmup_ticks = math.ceil(load.warmup_s * 1e9 / tick_ns)
        self.ticks: list[Tick] = []
        self.completed: list[int] = []
        self.progress = [-1] * self.active  # last tick received from each worker
        self.windows: list[_Window] = []
        self.cur_start = self.warmup_ticks
        self.warmup_published = 0
        self.snapshots: dict[int, asyncio.Task[Snapshots]] = {}
        self.unanswered: set[tuple[int, int]] = set()  # (boundary, endpoint) whose read timed out
        self.t0 = 0
        self.wall_offset_ns = time.time_ns() - time.monotonic_ns()
        self.rtt: float | None = None  # the round trip before the level (path_probe)
        self.connect_ns: list[int] = []  # the workers' connections: connect times
        self.kernel_rtt_us: list[int] = []  # and the kernel's RTT estimates

    # -- plans

    def plans(self) -> list[LevelPlan]:
        load = self.ctx.load
        common = LevelPlan(
            level_index=self.index,
            mode=load.mode,
            tick_ns=self.ctx.tick_ns,
            timeout_ns=int(load.request_timeout_s * 1e9),
            arrival=load.arrival,
            burstiness=load.burstiness,
            think_ns=int(load.think_time_s * 1e9),
            # the workers open their connections from one instant, each its stagger later
            # (Worker.open_grouped)
            open_at_ns=time.monotonic_ns() + OPEN_LEAD_NS,
        )
        if not self.ctx.rate_mode:
            self.slots = connections_per_worker(int(self.level), len(self.ctx.endpoints), self.active)
            return [dataclasses.replace(common, slots=n, seed=self.index * 1000 + w) for w, n in enumerate(self.slots)]
        share = self.level / self.active
        caps = _interleave(MAX_IN_FLIGHT, self.active)
        return [
            dataclasses.replace(
                common,
                rate=share,
                phase_ns=int(w * 1e9 / self.level),  # interleave the workers' schedules
                seed=self.index * 1000 + w,
                max_in_flight=caps[w],
                # each worker walks the trace's gaps from the request its connections start at
                trace=self.trace, trace_start=first_request(w, len(self.trace)) if self.trace else 0,
                # 20 ms of this worker's sends, so that few connections are opened mid-level
                # (Worker.open_more says why); at most 128 before T0, which at a remote server's
                # round trip per group of 8 is already 16 round trips
                preopen=min(caps[w], 128, 4 + math.ceil(share / 50)),
            )
            for w in range(self.active)
        ]

    # -- run

    async def run(self) -> LevelResult:
        pool = self.ctx.pool
        self.rtt = await self.ctx.api.round_trip()  # before any load: the path, not a queue
        if self.ctx.load.cache_reset == "each_level" and self.cache.cache is not None:
            why = await self.cache.reset()
            if why is not None:  # the level runs on what the cache holds, and its state says so
                self.ctx.publish(Warning(source="load", key=f"cache-reset-{self.index}",
                                         message=f"level {self.level:g}: the server's cache was not reset: {why}"))
        self.cache.mark(BEFORE)  # the cache's counters before this level's first request
        for w, plan in enumerate(self.plans()):
            pool.send(w, PrepareLevel(plan))
        connect_problem = None
        for _ in range(self.active):
            _, ready = await pool.expect(Ready, self.ctx.load.request_timeout_s + 10)
            if ready.first_error and connect_problem is None:
                connect_problem = ready.first_error
            self.connect_ns += ready.connect_ns
            self.kernel_rtt_us += ready.kernel_rtt_us
        if connect_problem:
            self.ctx.publish(Warning(source="load", message=f"level {self.level:g}: connecting: {connect_problem}", key=f"connect-{self.index}"))
        await self.cache.at(BEFORE)
        self.t0 = await self.ctx.share.start_at(self.index) if self.ctx.share else time.monotonic_ns() + T0_LEAD_NS
        for w in range(self.active):
            pool.send(w, StartAt(self.t0))
        self.ctx.publish(
            LevelStarted(
                mode=self.ctx.load.mode,
                level=self.level,
                index=self.index,
                total=self.total,
                batch_size=self.ctx.load.batch_size,
                arrival=self.ctx.load.arrival if self.ctx.rate_mode else None,
                workers=self.active,
                slo_search=self.slo_search,
                trial=self.trial,
            )
        )
        self.cpu_mark = read_cpu(self.ctx.cpu_roots)
        poller = asyncio.get_running_loop().create_task(self.poll_stats())
        try:
            status = await self.collect()
        finally:
            poller.cancel()
            for w in range(self.active):
                try:
                    pool.send(w, StopLevel())
                except WorkerGone:
                    pass
        for _ in range(self.active):
            await pool.expect(Stopped, TICK_SLACK_S)
        # figures measured on answers that were not the ones asked for, or on the few that passed;
        # failures from an endpoint that answered nothing are that endpoint's (the level is degraded)
        if status in ("stable", "unstable") and (self.bad_answers() or (self.mostly_failed() and not self.degraded())):
            status = "failed"
        result = await self.result(status)
        for task in self.snapshots.values():
            task.cancel()
        self.cache.cancel()
        return result

    def mostly_failed(self) -> bool:
        """More requests of the measured windows failed than succeeded (those never sent, dropped at
        rate mode's in-flight cap past the knee, are not failed requests)."""
        failed = sum(w.agg.error_count - w.agg.errors.get(DROPPED, 0) for w in self.windows)
        return failed > sum(w.agg.ok for w in self.windows)

    def bad_answers(self) -> int:
        """Answers of the measured windows that were malformed, wrong or too large, or refused
        because Triton had dropped their sequence."""
        return sum(w.agg.errors.get(kind, 0) for w in self.windows for kind in BAD_ANSWER_KINDS)

    async def collect(self) -> LevelStatus:
        """Take ticks until the level is decided; returns its status."""
        stopping = False
        while True:
            if self.ctx.stop.is_set() and not stopping:
                stopping = True
                if self.available() <= self.warmup_ticks:
                    return "interrupted"  # still warming up: nothing to finish
                self.max_ticks = self.min_ticks  # finish the current window, no extension
            expected_end = self.t0 + (self.available() + 1) * self.ctx.tick_ns
            wait_s = max(0.0, (expected_end - time.monotonic_ns()) / 1e9) + TICK_SLACK_S
            _, msg = await self.ctx.pool.receive(wait_s)
            if not isinstance(msg, TickReport) or msg.tick.level_index != self.index:
                continue
            self.add(msg.tick)
            self.publish_warmup()
            while (end := self.next_window_end()) is not None:
                status = await self.close_window(end)
                if status is not None:
                    return status
                if stopping:
                    return "interrupted"

    def add(self, tick: Tick) -> None:
        self.ticks.append(tick)
        while len(self.completed) <= tick.tick:
            self.completed.append(0)
        self.completed[tick.tick] += tick.completed
        self.progress[tick.worker] = max(self.progress[tick.worker], tick.tick)

    def available(self) -> int:
        """Ticks before this one are complete (every active worker has sent them)."""
        return min(self.progress) + 1

    def wall(self, tick: int) -> float:
        return (self.t0 + tick * self.ctx.tick_ns + self.wall_offset_ns) / 1e9

    # -- warmup

    def publish_warmup(self) -> None:
        available = min(self.available(), self.warmup_ticks)
        while self.warmup_published < self.warmup_ticks:
            start = self.warmup_published
            end = min(start + self.min_ticks, self.warmup_ticks)
            if available < end:
                return
            agg = aggregate(self.ticks, start, end, self.ctx.tick_ns, self.ctx.rate_mode)
            lat = latency_stats(agg.latency_ns, histogram=True)
            self.ctx.publish(self.window_event(agg, lat, None, len(self.windows) + self.warmup_count(), True, False))
            self.warmup_published = end
            self.cpu_mark = read_cpu(self.ctx.cpu_roots)  # the first measured window starts here

    def warmup_count(self) -> int:
        return math.ceil(self.warmup_published / self.min_ticks) if self.warmup_published else 0

    # -- measurement windows

    def next_window_end(self) -> int | None:
        return window_end(
            self.completed, self.cur_start, self.available(), self.min_ticks, self.max_ticks,
            self.ctx.load.min_window_requests,
        )

    def ensure_snapshot(self, boundary: int) -> asyncio.Task[Snapshots]:
        task = self.snapshots.get(boundary)
        stats = self.ctx.api.stats
        if task is None and (stats is None or (self.ctx.share is not None and not self.ctx.share.server_stats)):
            async def nothing() -> Snapshots:  # another host reads them, or the API has none
                return (None,) * len(self.ctx.endpoints)
            task = asyncio.get_running_loop().create_task(nothing())
            self.snapshots[boundary] = task
        if task is None:
            # each endpoint's statistics, read together; one that does not answer gives up before
            # the wait for them all does, so the others' still count
            each_s = STATS_TIMEOUT_S if len(self.ctx.endpoints) == 1 else 0.8 * STATS_TIMEOUT_S
            assert stats is not None

            async def read(e: int) -> object | None:
                asked = time.monotonic()
                found = await stats.snapshot(e, each_s)
                if found is None and gave_up(time.monotonic() - asked, each_s):
                    self.unanswered.add((boundary, e))
                return found

            async def every() -> Snapshots:
                return tuple(await asyncio.gather(*(read(e) for e in range(len(self.ctx.endpoints)))))
            task = asyncio.get_running_loop().create_task(every())
            self.snapshots[boundary] = task
        return task

    async def snapshot(self, boundary: int) -> Snapshots:
        """The statistics at a window boundary. Normally taken by poll_stats on the boundary;
        if the window's last tick arrived first, taken now (a few ms late) rather than never."""
        task = self.ensure_snapshot(boundary)
        try:
            return await asyncio.wait_for(asyncio.shield(task), STATS_TIMEOUT_S)
        except (TimeoutError, asyncio.CancelledError):
            self.unanswered.update((boundary, e) for e in range(len(self.ctx.endpoints)))
            return (None,) * len(self.ctx.endpoints)

    async def server_over(self, start: int, end: int, client_mean_s: float | None,
                          endpoint: int | None = None) -> ServerBreakdown | None:
        """The server's per-request times between two tick boundaries (one endpoint's, or summed
        over the endpoints that answered both times); None, with a warning, when a snapshot did not
        come in time or was read too far from its boundary to stand for it (server_stats); None, silently, where the
        server API has no statistics."""
        stats = self.ctx.api.stats
        if stats is None:
            return None
        before, after = await self.snapshot(start), await self.snapshot(end)
        chosen = range(len(before)) if endpoint is None else [endpoint]
        interval = (end - start) * self.ctx.tick_ns
        # a server that gave its counters at one edge and not at the other, or whose read timed out,
        # was too slow to answer (a server without the extension answers None at once, silently)
        late = [e for e in chosen if (before[e] is None) != (after[e] is None)
                or (start, e) in self.unanswered or (end, e) in self.unanswered]
        if late and (len(before) == 1 or endpoint is not None or len(late) == len(chosen)):
            self.ctx.publish(Warning(source="load", key=f"late-stats-{self.index}",
                                 message=f"level {self.level:g}: the server's statistics did not come within "
                                         f"{STATS_TIMEOUT_S:g} s (a busy machine?): its server breakdown is not shown"))
            return None
        if not all(stats.in_time(before[e], self.t0 + start * self.ctx.tick_ns, interval)
                   and stats.in_time(after[e], self.t0 + end * self.ctx.tick_ns, interval) for e in chosen):
            self.ctx.publish(Warning(source="load", key=f"late-stats-{self.index}",
                                 message=f"level {self.level:g}: the server's statistics came too late to stand for "
                                         "a window's edges (a busy machine?): its server breakdown is not shown"))
            return None
        if len(before) == 1:
            found = stats.breakdown([before[0]], [after[0]], client_mean_s)
        else:
            answered = [e for e in chosen if before[e] is not None and after[e] is not None]
            found = stats.breakdown([before[e] for e in answered], [after[e] for e in answered], client_mean_s)
        return unsplit(found) if self.ctx.api.decoupled else found

    def say_late_cache(self) -> None:
        """Once a level: its cache figures left out of a window for a reading that came late."""
        if self.cache.late and not self.late_cache_said:
            self.late_cache_said = True
            self.ctx.publish(Warning(source="load", key=f"late-cache-{self.index}",
                                     message=f"level {self.level:g}: the server's cache counters came too late to "
                                             "stand for a window's edges (a busy machine?): those figures are not shown"))

    async def poll_stats(self) -> None:
        """Snapshot the server's statistics at the tick boundaries where a window may end."""
        boundary = self.warmup_ticks
        while True:
            delay = (self.t0 + boundary * self.ctx.tick_ns - time.monotonic_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            if boundary == self.warmup_ticks or boundary >= self.cur_start + self.min_ticks:
                self.ensure_snapshot(boundary)
                self.cache.mark(boundary)
            boundary += 1

    async def close_window(self, end: int) -> LevelStatus | None:
        start = self.cur_start
        agg = aggregate((t for t in self.ticks if start <= t.tick < end), start, end, self.ctx.tick_ns, self.ctx.rate_mode)
        lat = latency_stats(agg.latency_ns, histogram=True)
        server = await self.server_over(start, end, lat.mean)
        cache = await self.cache.window(start, end)
        self.say_late_cache()
        reading = read_cpu(self.ctx.cpu_roots)
        cpu = share_between(self.cpu_mark, reading)
        self.cpu_mark = reading
        window = _Window(agg, lat, server, agg.ok / agg.duration_s, self.endpoint_parts(start, end), cpu, cache)
        self.windows.append(window)
        self.cur_start = end
        self.ticks = [t for t in self.ticks if t.tick >= end or t.tick < self.warmup_ticks]
        stable = is_stable(
            [w.throughput_rps for w in self.windows],
            [w.latency.mean for w in self.windows],
            self.ctx.load.stable_windows,
            self.ctx.load.stability_percent,
        )
        self.ctx.publish(self.window_event(agg, lat, server, len(self.windows) - 1 + self.warmup_count(), False, stable, cpu,
                                           cache))
        if agg.ok == 0 and agg.error_count > 0:
            return "failed"
        if stable:
            return "stable"
        if len(self.windows) >= self.ctx.load.max_windows:
            return "unstable"
        return None

    def endpoint_parts(self, start: int, end: int) -> list[Aggregate] | None:
        """Several endpoints: the window's ticks per endpoint (its workers' ticks)."""
        n = len(self.ctx.endpoints)
        if n == 1:
            return None
        return [aggregate((t for t in self.ticks if start <= t.tick < end and endpoint_of_worker(t.worker, n) == e),
                          start, end, self.ctx.tick_ns, self.ctx.rate_mode) for e in range(n)]

    def window_event(
        self, agg: Aggregate, lat: LatencyStats, server: ServerBreakdown | None, number: int, warmup: bool, stable: bool,
        cpu: CpuShare | None = None, cache: ServerCache | None = None,
    ) -> WindowResult:
        audit = client_audit(
            agg, self.ctx.cpu_cores, lat.p50, lat.mean, server.server_total if server else None, self.ctx.rate_mode,
            self.ctx.delay_limit,
        )
        return WindowResult(
            level=self.level,
            index=number,
            warmup=warmup,
            t_start=self.wall(agg.start_tick),
            t_end=self.wall(agg.end_tick),
            requests=agg.ok,
            errors=agg.error_count,
            throughput_rps=agg.ok / agg.duration_s,
            throughput_ips=agg.ok * self.ctx.load.batch_size / agg.duration_s,
            latency=lat,
            server=server,
            audit=audit,
            stable_so_far=stable,
            errors_by_kind=dict(agg.errors),
            stream=stream_stats(agg),
            sequence=sequence_stats(agg, SEQUENCE_DROPPED),
            others_cpu=cpu.others if cpu else None,
            steal=cpu.steal if cpu else None,
            cache=cache,
        )

    # -- result

    async def result(self, status: LevelStatus) -> LevelResult:
        load = self.ctx.load
        if status == "failed":
            chosen = self.windows
        else:
            chosen = self.windows[-load.stable_windows :]
        others = mean_share([w.cpu.others if w.cpu else None for w in chosen])
        steal = mean_share([w.cpu.steal if w.cpu else None for w in chosen])
        if status in ("stable", "unstable") and is_contended(others, steal, load.contended_percent):
            status = CONTENDED  # read as unstable: others' load, not the server's, shaped the figures
        base = functools.partial(LevelResult, mode=load.mode, level=self.level, index=self.index, status=status,
                                 batch_size=load.batch_size, slo_search=self.slo_search, trial=self.trial,
                                 others_cpu=others, steal=steal)
        if not chosen:
            return base(
                windows=0, merged_windows=0, requests=0, errors=0, throughput_rps=0.0,
                throughput_ips=0.0, latency=LatencyStats(count=0),
                target_rate=self.level if self.ctx.rate_mode else None,
            )
        agg = merge([w.agg for w in chosen], self.ctx.rate_mode)
        LoadDev.from_load(load).save_samples(self.index, self.trial, agg.latency_ns)
        lat = latency_stats(agg.latency_ns, histogram=True)
        server = await self.server_over(chosen[0].agg.start_tick, chosen[-1].agg.end_tick, lat.mean)
        cache = await self.cache.level(chosen[0].agg.start_tick, chosen[-1].agg.end_tick, [w.cache for w in chosen])
        self.say_late_cache()
        audit = client_audit(agg, self.ctx.cpu_cores, lat.p50, lat.mean, server.server_total if server else None, self.ctx.rate_mode,
                             self.ctx.delay_limit)
        # Errors are counted over every measured window, not only the merged ones: an outage in
        # the level's early windows must not vanish because the last windows were clean.
        every = merge([w.agg for w in self.windows], self.ctx.rate_mode) if len(chosen) < len(self.windows) else agg
        messages = [m for texts in every.messages.values() for m in texts]
        endpoints = await self.endpoint_results(chosen)
        if endpoints:  # each message says which endpoint it came from
            messages = [f"{e.name} ({e.url}): {m}" for e in endpoints for m in e.error_messages]
        stream = stream_stats(agg)
        if stream is not None and stream.itl_note:  # ITL shown as not measured: say why
            self.ctx.publish(Warning(source="load", message=f"level {self.level:g}: {stream.itl_note}", key=f"itl-{self.index}"))
        return base(
            windows=len(self.windows),
            merged_windows=len(chosen),
            requests=agg.ok,
            errors=every.error_count,
            throughput_rps=agg.ok / agg.duration_s,
            throughput_ips=agg.ok * load.batch_size / agg.duration_s,
            latency=lat,
            server=server,
            audit=audit,
            errors_by_kind=dict(every.errors),
            error_messages=messages,
            latency_uncorrected=latency_stats(agg.uncorrected_ns, histogram=True) if agg.uncorrected_ns is not None else None,
            target_rate=self.level if self.ctx.rate_mode else None,
            duration_s=agg.duration_s,
            network=self.network_path(),
            endpoints=endpoints,
            degraded=self.degraded(),
            stream=stream,
            sequence=sequence_stats(agg, SEQUENCE_DROPPED),
            cache=cache,
        )

    def degraded(self) -> str:
        """One line naming each endpoint that answered nothing (and failed) in some measured
        window; "" when every endpoint answered in every window. Such a level measured part of
        the servers: its figures are not the whole's."""
        if len(self.ctx.endpoints) == 1 or not self.windows:
            return ""
        dead = []
        for e, ep in enumerate(self.ctx.endpoints):
            lost = sum(1 for w in self.windows if w.parts and w.parts[e].ok == 0 and w.parts[e].error_count > 0)
            if lost:
                dead.append(f"{ep.name} answered nothing in {lost} of {len(self.windows)} measured windows")
        return "; ".join(dead)

    async def endpoint_results(self, chosen: list[_Window]) -> list[EndpointResult]:
        """Each endpoint's share of the merged windows (its errors over every measured window)."""
        if len(self.ctx.endpoints) == 1 or not chosen:
            return []
        out = []
        n = len(self.ctx.endpoints)
        for e, ep in enumerate(self.ctx.endpoints):
            parts = [w.parts[e] for w in chosen if w.parts is not None]
            agg = merge(parts, self.ctx.rate_mode)
            every = merge([w.parts[e] for w in self.windows if w.parts is not None], self.ctx.rate_mode)
            lat = latency_stats(agg.latency_ns, histogram=True)
            server = await self.server_over(chosen[0].agg.start_tick, chosen[-1].agg.end_tick, lat.mean, e)
            out.append(EndpointResult(
                name=ep.name,
                url=redact_url(ep.http_url) or "",
                connections=sum(c for w, c in enumerate(self.slots) if endpoint_of_worker(w, n) == e),
                target_rate=self.level / n if self.ctx.rate_mode else None,
                requests=agg.ok,
                errors=every.error_count,
                throughput_rps=agg.ok / agg.duration_s,
                throughput_ips=agg.ok * self.ctx.load.batch_size / agg.duration_s,
                latency=lat,
                server=server,
                errors_by_kind=dict(every.errors),
                error_messages=[m for texts in every.messages.values() for m in texts],
                failed=any(w.parts[e].ok == 0 and w.parts[e].error_count > 0 for w in self.windows if w.parts),
            ))
        return out

    def network_path(self) -> NetworkPath:
        """The level's path figures; the round trip from the probe, else the kernel's, else the
        connect time (both of which end at the next TCP endpoint: path_probe says why)."""
        connects = sorted(self.connect_ns)
        kernel = sorted(self.kernel_rtt_us)
        connect_p50 = connects[len(connects) // 2] / 1e9 if connects else None
        tcp_rtt = kernel[len(kernel) // 2] / 1e6 if kernel else None
        rtt, method = self.rtt, self.ctx.api.round_trip_method
        if rtt is None:
            rtt, method = (tcp_rtt, "tcp_info") if tcp_rtt is not None else (connect_p50, "connect time")
        return NetworkPath(rtt=rtt, rtt_method=method if rtt is not None else "", connections=len(connects),
                           connect_p50=connect_p50, connect_max=connects[-1] / 1e9 if connects else None,
                           tcp_rtt_p50=tcp_rtt, request_bytes=self.ctx.request_bytes)


async def run_sweep(
    api: ServerApi,
    load: Load,
    publish: Publish,
    stop: asyncio.Event,
    tick_ns: int | None = None,
    more_levels: Callable[[list[LevelResult]], float | None] | None = None,
    gpus: tuple[int, ...] = (),
    share: HostShare | None = None,
) -> list[LevelResult]:
    """Run every level of ``load`` against ``api``'s model (engine/load/server_api.py: for Triton,
    engine/triton/api.py's ``TritonApi(target, info)``); see the module docstring.

    ``more_levels``: after the planned levels, asked with the results so far for one more level
    to run (the latency-target search of engine/study) until it answers None. ``gpus``: where the
    model has instances (cuda_shm puts the inputs on the first). ``share``: this sweep is one
    host's share of a sweep driven from several (HostShare).

    Raises UserError before any load is generated when the request cannot be built (batch size
    beyond the model's max_batch_size, unsupported datatype, bad URL). Load workers are all gone
    when this returns or raises."""
    mode = mode_of(load.mode)
    levels = mode.levels(load)
    if not levels:
        raise UserError(f"load.{mode.levels_key}: no levels to run")
    module = api.transport(load)
    dev = LoadDev.from_load(load)
    if (line := dev.warning()) is not None:
        publish(Warning(source="load", message=line, key="load-dev"))
    requests = await api.requests(load, publish, stop)  # the tensors, made once
    if stop.is_set() or not requests:  # stopped while the requests were made: nothing more to prepare
        return []
    trace = _trace(api, load, publish)
    endpoints = list(api.endpoints())
    prepared = await api.prepare(load, requests, gpus)
    tick_ns = tick_ns or tick_for(load.window_ms)
    request_bytes = prepared[0].request_bytes
    results: list[LevelResult] = []
    pool: WorkerPool | None = None
    roots = await asyncio.to_thread(local_servers, endpoints)
    trials = Trials(load, publish, stop)
    ran = [0]  # levels run so far, trials included: a level after one finds the cache it left
    try:
        wanted = min(pool_size(load, process_cores()), _most_workers(load, levels, request_bytes))
        pool = WorkerPool(workers_multiple(wanted, len(endpoints)))
        await pool.start()
        ctx = SweepContext.of(pool, api, load, publish, stop, tick_ns, request_bytes, roots, share, trace)
        for w in range(pool.count):  # each worker sends to one endpoint for the whole sweep
            pool.send(w, UseTransport(module, prepared[endpoint_of_worker(w, len(endpoints))].payload, dev))
        await _start_at(load.start_at, publish, stop)
        queue = list(levels)  # planned levels first, then whatever more_levels asks for
        index = 0
        while not stop.is_set():
            if index >= len(queue):
                extra = more_levels(results) if more_levels is not None else None
                if extra is None:
                    break
                queue.append(float(extra))
            level, search = queue[index], index >= len(levels)
            total = len(queue) if search else len(levels)

            async def level_run(level: float, index: int, trial: int, total: int = total,
                                search: bool = search) -> tuple[LevelResult, list[float]]:
                run = _Level(ctx, level, index, total, search, trial, earlier_levels=ran[0])
                ran[0] += 1
                result = failed_by(stop, await run.run())
                return result, [w.throughput_rps for w in run.windows[-load.stable_windows:]]
            result = await trials.measure(level_run, level, index, results)
            results.append(result)
            _report_errors(result, publish)
            index += 1
            if lost_the_server(result) and not stop.is_set():
                if index >= len(levels) and more_levels is None:
                    break  # that was the last level: nothing to wait for
                wait_s = load.server_wait_s
                publish(Warning(source="load", message=f"server unreachable after level {level:g}: waiting up to "
                                f"{wait_s:.0f} s for it to be ready again", key=f"server-wait-{index - 1}"))
                waited = await _wait_for_every(api, stop, wait_s)
                if waited is None:
                    if not stop.is_set():
                        publish(Error(source="load", message=f"server not ready within {wait_s:.0f} s: the sweep stops"))
                    break
                publish(Warning(source="load", message=f"server ready again after {waited:.1f} s: the sweep goes on",
                                key=f"server-back-{index - 1}"))
            if result.status == "failed" and load.on_level_failure == "stop":
                publish(Warning(source="load", message=f"level {level:g} failed: the sweep stops (load.on_level_failure = 'stop')", key="sweep-stopped"))
                break
    except WorkerGone as exc:
        publish(Error(source="load", message=f"load generator failed: {exc}", fatal=True))
    finally:
        if pool is not None:
            await pool.close()
        for each in prepared:
            await each.close()
    publish(
        SweepFinished(
            levels=len(results),
            stable=sum(1 for r in results if r.status == "stable"),
            failed=sum(1 for r in results if r.status == "failed"),
            saturation_level=_saturation(results),
            degraded=sum(1 for r in results if r.degraded),
        )
    )
    return results


def _trace(api: ServerApi, load: Load, publish: Publish) -> tuple[float, ...]:
    """load.arrival = "trace": the trace's gaps (engine/load/arrivals.py), its own rate said once."""
    if load.arrival != "trace" or not mode_of(load.mode).open_loop:
        return ()
    times = list(api.trace_times or ())
    gaps, rate = trace_gaps(times), trace_rate(times)
    if gaps is None or rate is None:
        raise UserError("load.arrival = 'trace': expected a trace whose timestamps advance as load.input_data "
                        "(a Mooncake JSONL)")
    publish(Warning(source="load", key="trace-rate", message=(
        f"the trace's own rate is {rate:.3g} requests/s: load.rates = {rate:.3g} replays it as recorded, "
        f"{rate / 2:.3g} at half its speed, {rate * 2:.3g} at twice")))
    return gaps


async def _start_at(instant: float, publish: Publish, stop: asyncio.Event) -> None:
    """Wait, everything prepared, for load.start_at (several hosts' sweeps begin together)."""
    if instant <= 0:
        return
    wait_s = instant - time.time()
    if wait_s < 0:
        publish(Warning(source="load", key="start-at", message=(
            f"load.start_at was {-wait_s:.1f} s ago when the load was ready: the sweep starts at once")))
        return
    publish(PhaseChanged(phase="sweep", detail=f"waiting {wait_s:.1f} s for load.start_at"))
    try:
        await asyncio.wait_for(stop.wait(), wait_s)
    except TimeoutError:
        publish(PhaseChanged(phase="sweep", detail="started at load.start_at"))


async def _wait_for_every(api: ServerApi, stop: asyncio.Event, wait_s: float) -> float | None:
    """Seconds until every endpoint was ready again; None when one was not within ``wait_s``."""
    waited = 0.0
    for e in range(len(api.endpoints())):
        took = await api.wait_ready(e, stop, max(0.0, wait_s - waited))
        if took is None:
            return None
        waited += took
    return waited


CONNECTION_KINDS = (CONNECTION_REFUSED, CONNECTION_RESET, TIMEOUT, BAD_RESPONSE)


def lost_the_server(result: LevelResult) -> bool:
    """Most of the level's errors say the server itself was unreachable, not that it refused the
    request (a live server's rejected or server_error answer is no reason to wait)."""
    if result.status != "failed" or not result.errors:
        return False
    unreachable = sum(result.errors_by_kind.get(kind, 0) for kind in CONNECTION_KINDS)
    return unreachable * 2 > result.errors


def _most_workers(load: Load, levels: list[float], request_bytes: int) -> int:
    """No more processes than the busiest level will use."""
    big = pool_size(load, process_cores())
    return max(workers_for_level(load, level, big, request_bytes) for level in levels)


def _saturation(results: list[LevelResult]) -> float | None:
    # a level where the client was the limit measures us, not the server: never a saturation point
    # a level that is not sound (engine/analysis/answer.py) measured the box's noise: neither is a saturation point
    found = saturation_point([(r.level, r.throughput_rps) for r in results
                              if is_sound(r) and not r.audit.client_bound and not r.degraded])
    return found.level if found else None


def _report_errors(result: LevelResult, publish: Publish) -> None:
    if result.degraded:
        publish(Warning(source="load", key=f"degraded-{result.index}", message=(
            f"level {result.level:g} degraded: {result.degraded}: it measured part of the servers, so no decision "
            "rests on it and the run will not end ok")))
    if not result.errors_by_kind:
        return
    for ep in result.endpoints:
        if ep.failed:
            others = "the other endpoints went on" if result.requests else "no endpoint answered"
            publish(Warning(source="load", key=f"endpoint-failed-{result.index}-{ep.name}", message=(
                f"level {result.level:g}: endpoint {ep.name} ({ep.url}) failed ({ep.errors} failed requests: "
                f"{errors_line(ep.errors_by_kind, ep.error_messages)}); {others}")))
    line = errors_line(result.errors_by_kind, result.error_messages)
    bad = sum(result.errors_by_kind.get(kind, 0) for kind in BAD_ANSWER_KINDS)
    dropped = result.errors_by_kind.get(SEQUENCE_DROPPED, 0)
    if result.status == "failed" and dropped and result.requests:
        publish(Error(source="load", message=f"level {result.level:g} failed: Triton dropped sequences before their end "
                      f"({dropped} steps refused; its idle timeout, max_sequence_idle_microseconds, or too few "
                      f"sequence slots): {line}"))
    elif result.status == "failed" and bad and result.requests:
        publish(Error(source="load", message=f"level {result.level:g} failed: {bad} answers were malformed, wrong or too "
                      f"large: {line}"))
    elif result.status == "failed":
        # a window with no success, or more failures than successes over the level
        why = "most requests failed" if result.requests and result.errors > result.requests else \
            "every request in a window failed"
        publish(Error(source="load", message=f"level {result.level:g} failed: {why}: {line}"))
    else:
        # errors count every measured window; requests only the merged ones: do not mix them
        publish(Warning(source="load", message=f"level {result.level:g}: {result.errors} failed requests over its "
                        f"{result.windows} measured windows: {line}", key=f"errors-{result.index}"))
