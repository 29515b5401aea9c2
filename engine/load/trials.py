"""A level measured again while it cannot be trusted: unstable, contended, or out of line with
the level below it (engine/analysis/contention.py has the rules). Up to load.max_trials trials
in all, while load.trial_budget_s of the sweep's re-measuring is left; every trial is published
(LevelResult.trial), a superseded one with its reason (LevelResult.remeasure), and the last one
stands. Also which local processes are the server's (their CPU is not "others'")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urlsplit

from engine.analysis.contention import (
    CONTENDED,
    LevelFigures,
    contention_words,
    out_of_line,
    spread,
)
from engine.events import Event, LevelResult, Warning
from engine.http_threads import listener_pid
from engine.load.server_api import Endpoint
from engine.profiles import Load

Publish = Callable[[Event], None]
# measures one trial of a level: (level, index, trial) -> its result and its merged windows' rates
MeasureLevel = Callable[[float, int, int], Awaitable[tuple[LevelResult, list[float]]]]


def local_servers(endpoints: Sequence[Endpoint]) -> list[int]:
    """The processes of servers on this machine (loopback URLs): their CPU is the server's, not
    others' (an embedded server is already in our own process tree)."""
    pids = []
    for ep in endpoints:
        parts = urlsplit(ep.http_url)
        if parts.hostname in ("localhost", "127.0.0.1", "::1") and parts.port:
            pid = listener_pid(parts.port)
            if pid is not None:
                pids.append(pid)
    return pids


class Trials:
    """Measures a level again while it is unstable, contended or out of line with the level
    below it, up to load.max_trials trials and while load.trial_budget_s of re-measuring (the
    sweep's, over every level) is left."""

    def __init__(self, load: Load, publish: Publish, stop: asyncio.Event) -> None:
        self.load, self.publish, self.stop = load, publish, stop
        self.spent_s = 0.0
        self.spreads: dict[int, float] = {}  # level index -> its merged windows' throughput spread

    def figures(self, r: LevelResult) -> LevelFigures:
        return LevelFigures(float(r.level), r.throughput_ips, r.latency.p99, self.spreads.get(r.index, 0.0))

    def reason(self, r: LevelResult, below: LevelResult | None) -> tuple[str, str]:
        """(which: "this" or "below", why) the level, or the one below it, is measured again."""
        if r.status == "unstable":
            return "this", "its windows did not agree"
        if r.status == CONTENDED:
            return "this", contention_words(r.others_cpu, r.steal)
        if r.trial == 1 and r.status == "stable" and below is not None and below.status != "failed" and below.requests:
            return out_of_line(self.figures(below), self.figures(r), self.load.stability_percent)
        return "", ""

    def room(self, trial: int, took_s: float) -> bool:
        return (trial < self.load.max_trials and not self.stop.is_set()
                and self.spent_s + took_s <= self.load.trial_budget_s)

    async def run_one(self, make: MeasureLevel, level: float, index: int, trial: int) -> tuple[LevelResult, float]:
        started = time.monotonic()
        result, window_rates = await make(level, index, trial)
        self.spreads[index] = spread(window_rates)
        took = time.monotonic() - started
        if trial > 1:
            self.spent_s += took
        return result, took

    async def measure(self, make: MeasureLevel, level: float, index: int,
                      done: list[LevelResult]) -> LevelResult:
        """The level's standing result; every trial is published. A level below it found to be
        the noisy one (its p99 above this level's) is measured again in its place in ``done``."""
        below = next((r for r in reversed(done) if r.level < level), None)
        trial = 1
        while True:
            result, took = await self.run_one(make, level, index, trial)
            which, why = self.reason(result, below)
            if which == "this" and self.room(trial, took):
                result.remeasure = why
                self.publish(result)
                trial += 1
                continue
            self.publish(result)
            if which == "below" and below is not None and self.room(below.trial, took):
                await self.again_below(make, below, why, done)
            return result

    async def again_below(self, make: MeasureLevel, below: LevelResult, why: str,
                          done: list[LevelResult]) -> None:
        self.publish(Warning(source="load", key=f"remeasure-{below.index}-{below.trial}",
                             message=f"level {below.level:g} measured again: {why}"))
        trial = below.trial + 1
        while True:
            result, took = await self.run_one(make, below.level, below.index, trial)
            which, reason = self.reason(result, None)
            if which == "this" and self.room(trial, took):
                result.remeasure = reason
                self.publish(result)
                trial += 1
                continue
            self.publish(result)
            done[done.index(below)] = result
            return
