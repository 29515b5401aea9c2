"""The LLM server's cache read at window edges (engine/load/cache_reads.py): a window whose edge
reading came far from its edge, or timed out, has no cache figures and says so; a server without
counters stays silent. A fake cache whose replies the test delays (pure asyncio, no server)."""

from __future__ import annotations

import asyncio
import time

from engine.events import ServerCache
from engine.load import cache_reads
from engine.load.cache_reads import CacheReads


class Counters:
    """A cache whose reading at each call waits ``delays[n]`` seconds (0 after the list), then
    gives the time it answered, or None when ``none`` (a server with no counters)."""

    def __init__(self, delays: list[float], none: bool = False) -> None:
        self.delays, self.none, self.calls = delays, none, 0

    async def snapshot(self, timeout_s: float) -> object | None:
        delay = self.delays[self.calls] if self.calls < len(self.delays) else 0.0
        self.calls += 1
        if delay >= timeout_s:
            await asyncio.sleep(timeout_s)
            return None
        await asyncio.sleep(delay)
        return None if self.none else time.monotonic_ns()

    def between(self, before: object | None, after: object | None) -> ServerCache | None:
        return None if before is None or after is None else ServerCache(server="vLLM", prompt_tokens=1)

    def served_before(self, snapshot: object | None) -> bool | None:
        return None

    async def reset(self, timeout_s: float) -> str | None:
        return None


async def _window(cache: Counters, window_ms: int = 200) -> tuple[ServerCache | None, bool]:
    """Read the edges of one window (boundaries 0 and 1, ``window_ms`` or more apart) as the
    poller does, each edge the instant it is marked (a busy box's late wake-up moves the edge too)."""
    edges: dict[int, int] = {}
    reads = CacheReads(cache, 0, edges.__getitem__)  # type: ignore[arg-type]
    edges[0] = time.monotonic_ns()
    reads.mark(0)
    await asyncio.sleep(window_ms / 1000)
    edges[1] = time.monotonic_ns()
    reads.mark(1)
    return await reads.window(0, 1), reads.late


async def test_readings_at_their_edges_give_the_windows_figures() -> None:
    found, late = await _window(Counters([]))
    assert found == ServerCache(server="vLLM", prompt_tokens=1) and not late


async def test_a_reading_answered_most_of_a_window_late_leaves_the_window_out() -> None:
    found, late = await _window(Counters([0.0, 0.5]), window_ms=200)  # the end's answer 500 ms late
    assert found is None and late


async def test_a_reading_that_timed_out_leaves_the_window_out(monkeypatch) -> None:
    monkeypatch.setattr(cache_reads, "READ_TIMEOUT_S", 0.05)
    found, late = await _window(Counters([0.0, 1.0]), window_ms=100)
    assert found is None and late


async def test_a_server_without_counters_is_silent() -> None:
    found, late = await _window(Counters([], none=True))
    assert found is None and not late
