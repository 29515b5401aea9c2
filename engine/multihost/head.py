"""The head's sweep when several hosts drive one session: its own share of every level (the
ordinary sweep, as host 0), every host started on one instant of the head's clock, and each
window and level merged from what the hosts sent (engine/analysis/host_merge.py) before it is
published. Only the head reads Triton's statistics. A host that stops sending is named, left
out from then on, and every level it missed is degraded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import msgspec

from engine.analysis.answer import is_sound
from engine.analysis.host_merge import (
    host_result,
    merged_sequence,
    merged_server,
    merged_status,
    merged_window,
    stable_tail,
)
from engine.analysis.latency_merge import merged_latency
from engine.analysis.saturation import saturation_point
from engine.analysis.summed import largest_known, merged_audit, summed_counts
from engine.events import (
    Error,
    Event,
    HostResult,
    LevelResult,
    LevelStarted,
    SweepFinished,
    Warning,
    WindowResult,
    event_from_dict,
)
from engine.load.sweep import TICK_SLACK_S, HostShare, Publish, run_sweep
from engine.modes import mode_of
from engine.multihost.group import START_LEAD_NS, HostGroup, Member, Refused
from engine.multihost.host_plan import host_load
from engine.multihost.shares import host_share
from engine.profiles import Load
from engine.triton.api import TritonApi
from engine.triton.target import Target, TargetInfo

__all__ = ["HeadSweep", "HostGroup", "sweep_of"]  # HostGroup: the session's options name it

READY_SLACK_S = 30.0  # beyond the request timeout: a host's workers connecting for a level
LEVEL_SLACK_S = 30.0  # a host's level result after the head's own
ENDED_CHECK_S = 0.5  # while a host's window is awaited, how often to look for its level's end
GATE_SLICE_S = 1.0


class SweepOptions(Protocol):
    hosts: HostGroup | None  # this host heads a group: the group's sweep
    more_levels: Callable[[list[LevelResult]], float | None] | None  # one host's sweep only


async def sweep_of(options: SweepOptions, target: Target, info: TargetInfo, load: Load, publish: Publish,
                   stop: asyncio.Event, gpus: tuple[int, ...]) -> list[LevelResult]:
    """The session's sweep: this host's alone (engine/load/sweep.py), or its group's when it heads one."""
    if options.hosts is None:
        return await run_sweep(TritonApi(target, info), load, publish, stop, more_levels=options.more_levels, gpus=gpus)
    return await HeadSweep(options.hosts, load, publish).run(target, info, stop, gpus)


class _Store:
    """A store connection and the one thread its blocking calls run on."""

    def __init__(self, group: HostGroup) -> None:
        self.group = group
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuscale-store")

    async def call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)


class HeadSweep:
    def __init__(self, group: HostGroup, load: Load, publish: Publish) -> None:
        self.group, self.load, self.publish = group, load, publish
        self.mode = mode_of(load.mode)
        self.levels = self.mode.levels(load)
        self.gate = _Store(group)
        self.inbox = _Store(group.copy())
        self.window_s = load.window_ms / 1000
        self.results: list[LevelResult] = []
        self.gone_at: dict[int, int] = {}  # rank -> index of the first level it missed
        self.refusals_said = 0  # how many of the group's refused values are published

    def say_refusals(self) -> None:
        """Each store value the group refused (not a group host's), once, as a warning."""
        refusals = self.group.refusals
        for line in refusals[self.refusals_said:]:
            self.publish(Warning(source="load", key=f"store-refused-{self.refusals_said}", message=line))
            self.refusals_said += 1

    def label(self, member: Member) -> str:
        return f"{member.rank} ({member.name})"

    def leave_out(self, member: Member, index: int, why: str) -> None:
        if member.gone:
            return
        member.gone = why
        self.gone_at[member.rank] = index
        self.publish(Warning(source="load", key=f"host-gone-{member.rank}", message=(
            f"host {self.label(member)} {why}: it is left out and the other hosts go on; every level it "
            "missed is degraded")))

    # -- the start of each level

    async def start_at(self, index: int) -> int:
        """Every live host ready for level ``index``, then one instant for all (the head's gate)."""
        deadline = time.monotonic() + self.load.request_timeout_s + READY_SLACK_S
        while waiting := [m for m in self.group.live()
                          if not await self.gate.call(self.group.has, f"ready/{index}/{m.rank}")]:
            if time.monotonic() > deadline:
                for m in waiting:
                    self.leave_out(m, index, f"was not ready for level {self.levels[index]:g}")
                break
            # in slices: a host the merge finds gone meanwhile is not waited for
            await self.gate.call(self.group.wait_for, [f"ready/{index}/{m.rank}" for m in waiting], GATE_SLICE_S)
        self.say_refusals()
        start_wall = time.time_ns() + START_LEAD_NS
        await self.gate.call(self.group.set, f"start/{index}", start_wall)
        return self.group.local_monotonic(start_wall)

    # -- merging

    async def gather(self, keys: dict[int, str], timeout_s: float) -> dict[int, Event]:
        """The events under ``keys`` (rank -> key) set within ``timeout_s``, read and decoded off
        the event loop; ranks missing are absent."""
        group = self.inbox.group
        missing = set(await self.inbox.call(group.wait_for, list(keys.values()), timeout_s))

        def read() -> dict[int, Event]:
            got = {}
            for rank, key in keys.items():
                if key in missing:
                    continue
                try:
                    got[rank] = event_from_dict(group.get(key, sender=rank))
                except Refused as exc:  # read as missing: not that host's value (it was written over)
                    group.refuse(str(exc))
            return got
        got = await self.inbox.call(read)
        self.say_refusals()
        return got

    async def run(self, target: Target, info: TargetInfo, stop: asyncio.Event, gpus: tuple[int, ...]) -> list[LevelResult]:
        if self.group.swept:
            self.publish(Warning(source="load", key="hosts-swept", message=(
                "the hosts' sweep has run: another needs the group formed again (start every host anew)")))
            return []
        self.group.swept = True
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        mine = host_load(self.load, self.group.hosts, 0)
        share = HostShare(start_at=self.start_at, server_stats=True)

        async def own() -> list[LevelResult]:
            try:
                return await run_sweep(TritonApi(target, info), mine, queue.put_nowait, stop, gpus=gpus, share=share)
            finally:
                queue.put_nowait(None)

        task = asyncio.get_running_loop().create_task(own())
        try:
            level = _LevelMerge(self, -1)
            while (event := await queue.get()) is not None:
                if isinstance(event, LevelStarted):
                    level = _LevelMerge(self, event.index)
                    self.publish(msgspec.structs.replace(event, level=self.levels[event.index]))
                elif isinstance(event, WindowResult):
                    self.publish(await level.window(event))
                elif isinstance(event, LevelResult):
                    result = await level.result(event)
                    self.results.append(result)
                    self.publish(result)
                elif isinstance(event, SweepFinished):
                    self.publish(self.finished())
                elif isinstance(event, (Warning, Error)) and level.index >= 0:
                    self.publish(msgspec.structs.replace(event, message=self.own_words(event.message, level.index, mine)))
                else:
                    self.publish(event)
            await task
        finally:
            await self.gate.call(self.group.set, "end", 1)
            if not task.done():
                task.cancel()
            for store in (self.gate, self.inbox):
                store.pool.shutdown(wait=False)
        return self.results

    def own_words(self, message: str, index: int, mine: Load) -> str:
        return share_words(message, self.levels[index], mode_of(mine.mode).levels(mine)[index])

    def finished(self) -> SweepFinished:
        results = self.results
        found = saturation_point([(r.level, r.throughput_rps) for r in results
                                  if is_sound(r) and not r.audit.client_bound and not r.degraded])
        return SweepFinished(levels=len(results), stable=sum(1 for r in results if r.status == "stable"),
                             failed=sum(1 for r in results if r.status == "failed"),
                             saturation_level=found.level if found else None,
                             degraded=sum(1 for r in results if r.degraded))


class _LevelMerge:
    """One level's windows and result, merged as the head's own come in."""

    def __init__(self, head: HeadSweep, index: int) -> None:
        self.head, self.index = head, index
        self.members = head.group.live()  # the hosts that started this level
        self.names = {m.rank: head.label(m) for m in head.group.members}
        self.windows: dict[int, list[WindowResult]] = {m.rank: [] for m in head.group.members}
        self.merged: list[WindowResult] = []  # measured ones
        self.servers: list[Any] = []
        self.ended: set[int] = set()  # hosts whose level ended early (their result is in)
        self.missed: dict[int, str] = {}  # hosts that started this level and are missing from it: why

    def level(self) -> float:
        return self.head.levels[self.index]

    async def window(self, own: WindowResult) -> WindowResult:
        head = self.head
        waiting = {m.rank: f"win/{self.index}/{m.rank}/{own.index}" for m in self.members
                   if not m.gone and m.rank not in self.ended}
        got = await self.windows_or_ends(waiting, head.window_s + TICK_SLACK_S)
        for m in self.members:
            if m.rank in waiting and m.rank not in got:
                if await head.inbox.call(head.inbox.group.has, f"lvl/{self.index}/{m.rank}"):
                    self.ended.add(m.rank)  # its level ended (a failed window): not gone
                else:
                    head.leave_out(m, self.index, f"sent no window {own.index} of level {self.level():g}")
            if m.gone and m.rank not in self.missed:
                self.missed[m.rank] = m.gone
        parts = [(self.names[0], own)]
        for rank, window in sorted(got.items()):
            assert isinstance(window, WindowResult)
            parts.append((self.names[rank], window))
            if not own.warmup:
                self.windows[rank].append(window)
        if own.warmup:
            return await asyncio.to_thread(merged_window, self.level(), parts, None)
        self.windows[0].append(own)
        self.servers.append(own.server)
        merged = await asyncio.to_thread(merged_window, self.level(), parts, own.server)
        self.merged.append(merged)
        end = stable_tail(self.merged, head.load.stable_windows, head.load.stability_percent)
        merged.stable_so_far = end == len(self.merged)
        return merged

    async def windows_or_ends(self, waiting: dict[int, str], timeout_s: float) -> dict[int, Event]:
        """The hosts' windows under ``waiting`` (rank -> key) within ``timeout_s``; a host whose
        level result comes in first (stopped, or its level failed) sends no more windows, and is
        not waited for past the next ENDED_CHECK_S."""
        head = self.head
        deadline = time.monotonic() + timeout_s
        got: dict[int, Event] = {}
        pending = dict(waiting)
        while pending and (left := deadline - time.monotonic()) > 0:
            got.update(await head.gather(pending, min(left, ENDED_CHECK_S)))
            for rank in [r for r in pending if r in got]:
                del pending[rank]
            for rank, key in list(pending.items()):
                if await head.inbox.call(head.inbox.group.store.check, [key]):  # there, and refused: missing
                    del pending[rank]
                elif await head.inbox.call(head.inbox.group.has, f"lvl/{self.index}/{rank}"):
                    del pending[rank]  # the caller marks it ended
        return got

    async def result(self, own: LevelResult) -> LevelResult:
        head, load = self.head, self.head.load
        waiting = {m.rank: f"lvl/{self.index}/{m.rank}" for m in self.members if not m.gone}
        stopped = own.status == "interrupted"  # stopped here: the hosts' results are not waited for
        got = await head.gather(waiting, 0.0 if stopped else LEVEL_SLACK_S + head.window_s)
        for m in self.members:
            if m.rank in waiting and m.rank not in got and not stopped:
                head.leave_out(m, self.index, f"sent no result for level {self.level():g}")
            result = got.get(m.rank)
            if isinstance(result, LevelResult) and result.status == "interrupted" and not stopped:
                head.leave_out(m, self.index, f"was stopped during level {self.level():g}")  # not the session
                del got[m.rank]
            if m.gone and m.rank not in self.missed:
                self.missed[m.rank] = m.gone
        theirs: dict[int, LevelResult] = {0: own}
        theirs.update({r: e for r, e in got.items() if isinstance(e, LevelResult)})
        statuses = [r.status for r in theirs.values()]
        end = stable_tail(self.merged, load.stable_windows, load.stability_percent)
        if "failed" in statuses or end is None:
            chosen = range(len(self.merged)) if "failed" in statuses else range(max(0, len(self.merged) - load.stable_windows), len(self.merged))
        else:
            chosen = range(end - load.stable_windows, end)
        picked = {w.index for w in (self.merged[i] for i in chosen)}
        hosts = [self.host(m, theirs.get(m.rank), picked) for m in head.group.members]
        live = [h for h in hosts if not h.missing]
        windows = [w for h in theirs for w in self.windows[h] if w.index in picked]
        requests = sum(h.requests for h in live)
        duration = sum(self.merged[i].t_end - self.merged[i].t_start for i in chosen)
        return LevelResult(
            mode=own.mode, level=self.level(), index=self.index,
            status=merged_status(statuses, end is not None), batch_size=own.batch_size,
            windows=len(self.merged), merged_windows=len(chosen), requests=requests,
            errors=sum(r.errors for r in theirs.values()),
            throughput_rps=sum(h.throughput_rps for h in live), throughput_ips=sum(h.throughput_ips for h in live),
            latency=merged_latency([w.latency for w in windows]),
            server=merged_server([self.servers[i] for i in chosen]),
            audit=merged_audit([(self.names[r], e.audit) for r, e in sorted(theirs.items())]),
            errors_by_kind=summed_counts([r.errors_by_kind for r in theirs.values()]),
            error_messages=[f"host {self.names[r]}: {m}" for r, e in sorted(theirs.items()) for m in e.error_messages],
            target_rate=self.level() if head.mode.open_loop else None,
            duration_s=duration, network=own.network,
            degraded=self.degraded(hosts),
            others_cpu=largest_known([e.others_cpu for e in theirs.values()]),
            steal=largest_known([e.steal for e in theirs.values()]),
            hosts=hosts,
            sequence=merged_sequence([w.sequence for w in windows], duration),
        )

    def host(self, member: Member, result: LevelResult | None, picked: set[int]) -> HostResult:
        head = self.head
        share = host_share(self.level(), head.group.hosts, member.rank, head.mode.open_loop)
        clock = member.clock
        missing = self.missed.get(member.rank, "")
        if not missing and member.gone and member.rank not in {m.rank for m in self.members}:
            # gone before this level started
            missing = f"left out since level {head.levels[head.gone_at[member.rank]]:g} ({member.gone})"
        return host_result(member.rank, member.name, [w for w in self.windows[member.rank] if w.index in picked],
                           head.load.batch_size, result.audit if result else merged_audit([]),
                           share, head.mode.open_loop, clock.offset_ns / 1e9 if clock else None,
                           clock.rtt_ns / 1e9 if clock else None, missing)

    def degraded(self, hosts: list[HostResult]) -> str:
        return "; ".join(f"host {h.rank} ({h.name}) {h.missing}" for h in hosts if h.missing)


def share_words(message: str, level: float, share: float) -> str:
    """A line of the head's own sweep, which knows only its share of the level, about the level."""
    said = f"level {share:g}"
    if not message.startswith(said) or message[len(said):len(said) + 1] not in (":", " "):
        return message
    return f"level {level:g} (host 0's share: {share:g}){message[len(said):]}"
