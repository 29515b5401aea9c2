"""The folds of `gpuscale-tui merge` (engine/record/merge.py): several load hosts' windows,
and their levels, as one window or level of the hosts together. Pure functions of events.

Throughput, requests and errors are summed; latency comes from the summed histograms
(engine/analysis/latency_merge.py); the server's statistics are the first host's (Triton counts
every host's requests), its outside-the-server share against the merged mean; each host's
client audit stays named in the reasons. A level the hosts measured more than a window apart
is degraded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from engine.analysis.host_merge import merged_window as host_merged_window
from engine.analysis.latency_merge import merged_latency
from engine.analysis.summed import largest_known, summed
from engine.events import (
    EndpointResult,
    LatencyStats,
    LevelResult,
    LevelStarted,
    LevelStatus,
    ServerBreakdown,
    WindowResult,
)

# the worse of two statuses wins (a merged level is as good as its worst host's)
_LEVEL_RANK: dict[str, int] = {"stable": 0, "unstable": 1, "contended": 2, "interrupted": 3, "failed": 4}
MESSAGES_KEPT = 10


@dataclass
class LevelBlock:
    """A level as one host ran it: its start, its windows in order, its result."""

    start: LevelStarted
    windows: list[WindowResult] = field(default_factory=list)
    result: LevelResult | None = None

    @property
    def level_key(self) -> tuple[int, float, bool]:
        """The level whatever its trial: its place in the sweep, its value, a search's or not."""
        return (self.start.index, self.start.level, self.start.slo_search)

    def first_measured(self) -> float | None:
        return next((w.t_start for w in self.windows if not w.warmup), None)

def _worst_level(statuses: Sequence[LevelStatus]) -> LevelStatus:
    return max(statuses, key=lambda s: _LEVEL_RANK.get(s, 0))


def _server(server: ServerBreakdown | None, latency: LatencyStats) -> ServerBreakdown | None:
    """The first host's reading of the server (Triton's statistics count every host's requests),
    its outside-the-server share against the merged mean."""
    if server is None:
        return None
    outside = latency.mean - server.server_total if latency.mean is not None and server.server_total is not None else None
    return msgspec.structs.replace(server, client_minus_server=outside)


def _latency_or_none(parts: Sequence[LatencyStats | None]) -> LatencyStats | None:
    known = [p for p in parts if p is not None]
    return merged_latency(known) if known else None


def merged_window(windows: Sequence[WindowResult], names: Sequence[str], scale: int) -> WindowResult:
    """One window of every host (the head's live rule, engine/analysis/host_merge.py), the
    server's reading the first host's."""
    first = windows[0]
    merged = host_merged_window(first.level * scale, list(zip(names, windows, strict=True)), None,
                                all(w.stable_so_far for w in windows))
    return msgspec.structs.replace(merged, server=_server(first.server, merged.latency))


def _merged_endpoints(results: Sequence[LevelResult], names: Sequence[str]) -> list[EndpointResult]:
    """Each endpoint's share summed over the hosts, where every host spread over the same ones."""
    by_host = [{e.name: e for e in r.endpoints} for r in results]
    if not by_host[0] or any(set(h) != set(by_host[0]) for h in by_host):
        return []
    out = []
    for name, first in by_host[0].items():
        each = [h[name] for h in by_host]
        figures = summed(each, names)
        out.append(msgspec.structs.replace(
            first, **figures, server=_server(first.server, figures["latency"]),
            error_messages=[f"{host}: {m}" for e, host in zip(each, names, strict=True) for m in e.error_messages][:MESSAGES_KEPT],
            failed=any(e.failed for e in each)))
    return out


def out_of_step(blocks: Sequence[LevelBlock], names: Sequence[str], window_s: float) -> str:
    """One line when the hosts began measuring this level more than a window apart; "" else."""
    starts = [(b.first_measured(), name) for b, name in zip(blocks, names, strict=True)]
    known = [(t, n) for t, n in starts if t is not None]
    if len(known) < 2:
        return ""
    (early, first), (late, last) = min(known), max(known)
    if late - early <= window_s:
        return ""
    return (f"the hosts measured it at different times: {last} began {late - early:.1f} s after {first}, more than a "
            f"window ({window_s:g} s)")


def merged_result(blocks: Sequence[LevelBlock], names: Sequence[str], scale: int, window_s: float) -> LevelResult:
    results = [b.result for b in blocks]
    assert all(r is not None for r in results)  # callers merge only levels every host finished
    done: list[LevelResult] = [r for r in results if r is not None]
    first = done[0]
    figures = summed(done, names)
    degraded = [f"{name}: {r.degraded}" for r, name in zip(done, names, strict=True) if r.degraded]
    if step := out_of_step(blocks, names, window_s):
        trials = [b.start.trial for b in blocks]
        if len(set(trials)) > 1:  # say which trials were set side by side
            step += " (kept trials: " + ", ".join(f"{n} {t}" for n, t in zip(names, trials, strict=True)) + ")"
        degraded.insert(0, step)
    return LevelResult(
        ts=first.ts,
        mode=first.mode,
        level=first.level * scale,
        index=first.index,
        status=_worst_level([r.status for r in done]),
        batch_size=first.batch_size,
        windows=max(r.windows for r in done),
        merged_windows=min(r.merged_windows for r in done),
        server=_server(first.server, figures["latency"]),
        error_messages=[f"{name}: {m}" for r, name in zip(done, names, strict=True) for m in r.error_messages][:MESSAGES_KEPT],
        latency_uncorrected=_latency_or_none([r.latency_uncorrected for r in done]),
        duration_s=max(r.duration_s for r in done),
        slo_search=first.slo_search,
        network=first.network,
        endpoints=_merged_endpoints(done, names),
        degraded="; ".join(degraded),
        others_cpu=largest_known([r.others_cpu for r in done]),
        steal=largest_known([r.steal for r in done]),
        trial=max(r.trial for r in done),  # the merged level was measured again if any host's was
        remeasure="",  # each host's kept trial: none is superseded
        **figures,
    )
