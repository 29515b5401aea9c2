"""An LLM server's cache at a level's window edges (the server API's ``cache``,
engine/load/server_api.py): its figures per window and over the level's merged windows, and how
warm the cache was when the level began.

Read beside the server's statistics, at the same tick boundaries (``mark`` from the level's
poller; ``at`` takes a late one a few ms late rather than never). A window whose edge reading
came too far from its edge, or never came while the other did, has no cache figures (``late``
says so, for the level's warning) rather than figures over another interval. A level's counters are the
delta from its first merged window's start to its last one's end; its gauges (KV usage, waiting)
the mean of those windows' end readings, the fullest replica's KV usage the highest of them.
Several replicas (an OpenAI API over server.urls): ``cache`` reads every one's /metrics at each
edge and its figures cover them all (engine/openai/server_metrics.py's ReplicaCaches). Warmth: a
level after others in this sweep found the cache they left ("warm from earlier levels"); the first
one is "cold" when the servers' counters said none had taken a prompt before it, else "warm from
before this sweep".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from engine.analysis.sane_values import gave_up, read_at_edge
from engine.events import ServerCache

if TYPE_CHECKING:
    from engine.load.server_api import CacheStats

READ_TIMEOUT_S = 2.0
BEFORE = -1  # the reading before the level's first request
COLD, WARM_EARLIER, WARM_BEFORE = "cold", "warm from earlier levels", "warm from before this sweep"
RESET = "cold: reset before the level"  # load.cache_reset = "each_level", and the server took it


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _max(values: Sequence[float | None]) -> float | None:
    return max((v for v in values if v is not None), default=None)


class CacheReads:
    """One level's readings of the server's cache (nothing at all where ``cache`` is None)."""

    def __init__(self, cache: CacheStats | None, earlier_levels: int,
                 edge_ns: Callable[[int], int] | None = None) -> None:
        self.cache = cache
        self.earlier_levels = earlier_levels  # levels this sweep ran before this one (trials included)
        self.edge_ns = edge_ns  # a tick boundary's monotonic time (None: readings not timed)
        self.reads: dict[int, asyncio.Task[object | None]] = {}
        self.times: dict[int, tuple[int, int]] = {}  # boundary -> (asked, answered) of a reading that came
        self.timed_out: set[int] = set()
        self.late = False  # a window's figures were left out for a late reading
        self.was_reset = False

    async def reset(self) -> str | None:
        """Empty the server's cache before the level; None when done, else why not."""
        if self.cache is None:
            return "the server's cache is not read"
        why = await self.cache.reset(READ_TIMEOUT_S * 5)
        self.was_reset = why is None
        return why

    def mark(self, boundary: int) -> None:
        """Start reading the counters for the tick boundary ``boundary`` (BEFORE: the level's start)."""
        if self.cache is None or boundary in self.reads:
            return
        self.reads[boundary] = asyncio.get_running_loop().create_task(self._read(boundary))

    async def _read(self, boundary: int) -> object | None:
        assert self.cache is not None
        asked = time.monotonic_ns()
        found = await self.cache.snapshot(READ_TIMEOUT_S)
        answered = time.monotonic_ns()
        if found is not None:
            self.times[boundary] = (asked, answered)
        elif gave_up((answered - asked) / 1e9, READ_TIMEOUT_S):
            self.timed_out.add(boundary)
        return found

    async def at(self, boundary: int) -> object | None:
        self.mark(boundary)
        task = self.reads.get(boundary)
        if task is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(task), READ_TIMEOUT_S + 1)
        except (TimeoutError, asyncio.CancelledError):
            self.timed_out.add(boundary)
            return None

    def _in_time(self, start: int, end: int) -> bool:
        """Whether both edges' readings stand for their edges (a server with no counters at all,
        answering None at once, is not late)."""
        if start in self.timed_out or end in self.timed_out:
            return False
        if self.edge_ns is None:
            return True
        first, last = self.edge_ns(start), self.edge_ns(end)
        return all(read_at_edge(*self.times[b], edge, last - first)
                   for b, edge in ((start, first), (end, last)) if b in self.times)

    async def window(self, start: int, end: int) -> ServerCache | None:
        if self.cache is None:
            return None
        before, after = await self.at(start), await self.at(end)
        if not self._in_time(start, end):
            self.late = True
            return None
        return self.cache.between(before, after)

    async def state(self) -> str:
        if self.was_reset:
            return RESET
        if self.earlier_levels:
            return WARM_EARLIER
        from_before = await self.at(BEFORE)
        if self.cache is None or from_before is None:
            return ""
        # the counters before the level: any prompt taken means the cache may hold it
        served = self.cache.served_before(from_before)
        if served is None:
            return ""
        return WARM_BEFORE if served else COLD

    async def level(self, start: int, end: int, windows: Sequence[ServerCache | None]) -> ServerCache | None:
        """The cache over the merged windows (ticks ``start`` to ``end``), with their gauges' mean."""
        over = await self.window(start, end)
        if over is None:
            return None
        return msgspec.structs.replace(
            over, kv_usage=_mean([w.kv_usage for w in windows if w is not None]) if windows else over.kv_usage,
            waiting=_mean([w.waiting for w in windows if w is not None]) if windows else over.waiting,
            kv_usage_max=_max([w.kv_usage_max for w in windows if w is not None]) if windows else over.kv_usage_max,
            state=await self.state())

    def cancel(self) -> None:
        for task in self.reads.values():
            task.cancel()

