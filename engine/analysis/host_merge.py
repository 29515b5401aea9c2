"""A level driven from several client hosts, merged on the head (pure): each window's figures
summed over the hosts, its latency read from the hosts' histograms added together
(engine/analysis/latency_merge.py, the one merge rule `merge` uses too), each host's
audit kept and the client-bound one named, a missing host named.

Throughputs add (the hosts' windows cover the same instants of the head's clock). Percentiles
come from the merged histogram, so they are within latency_histogram.RELATIVE_ERROR of the
exact percentiles of every host's samples together, and are marked not exact; the mean, min and
max are exact (weighted by count)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.analysis.latency_merge import merged_latency
from engine.analysis.stability import is_stable
from engine.analysis.summed import largest_known, summed
from engine.events import (
    ClientAudit,
    HostResult,
    LevelStatus,
    SequenceStats,
    ServerBreakdown,
    WindowResult,
)

# how a level's status reads when its hosts disagree: the first of these any host has
_WORST_FIRST: tuple[LevelStatus, ...] = ("failed", "interrupted", "contended")


def merged_sequence(parts: Sequence[SequenceStats | None], duration_s: float | None = None) -> SequenceStats | None:
    """A sequence model's step figures over every host: the first steps' and the later steps'
    latency from the summed histograms, sequences and dropped steps summed. Sequences per second:
    the hosts' rates summed (windows of the same instants), or, given ``duration_s`` (a level's
    merged windows), the sequences over it."""
    known = [p for p in parts if p is not None]
    if not known:
        return None
    sequences = sum(p.sequences for p in known)
    if duration_s is None:
        rate = sum(p.sequences_per_s for p in known)
    else:
        rate = sequences / duration_s if duration_s > 0 else 0.0
    return SequenceStats(
        first_step=merged_latency([p.first_step for p in known]),
        later_steps=merged_latency([p.later_steps for p in known]),
        sequences_per_s=rate, sequences=sequences, dropped=sum(p.dropped for p in known),
    )


def merged_server(parts: Sequence[ServerBreakdown | None]) -> ServerBreakdown | None:
    """Several intervals' server breakdowns as one: counts summed, per-request times weighted by
    each interval's requests; None when any interval has none (its edges were not read)."""
    if not parts or any(p is None for p in parts):
        return None
    chosen = [p for p in parts if p is not None]
    total = sum(p.request_count for p in chosen)

    def mean_of(name: str) -> float | None:
        values = [(p.request_count, getattr(p, name)) for p in chosen]
        if total == 0 or any(v is None for _, v in values):
            return None
        return sum(n * v for n, v in values) / total

    inferences, executions = sum(p.inference_count for p in chosen), sum(p.execution_count for p in chosen)
    return ServerBreakdown(
        request_count=total, inference_count=inferences, execution_count=executions,
        queue=mean_of("queue"), compute_input=mean_of("compute_input"), compute_infer=mean_of("compute_infer"),
        compute_output=mean_of("compute_output"), server_total=mean_of("server_total"),
        avg_batch_size=inferences / executions if executions else None,
        client_minus_server=mean_of("client_minus_server"),
        dropped=list(dict.fromkeys(d for p in chosen for d in p.dropped)),
        no_split=next((p.no_split for p in chosen if p.no_split), ""),
    )


def merged_window(level: float, parts: Sequence[tuple[str, WindowResult]], server: ServerBreakdown | None,
                  stable_so_far: bool = False) -> WindowResult:
    """One window of the level: the hosts' windows of the same number (the head's live merge and
    `merge`'s alike), throughput and errors summed, latency from the summed histograms, the span
    from the earliest start to the latest end."""
    windows = [w for _, w in parts]
    first = windows[0]
    return WindowResult(
        ts=first.ts,
        level=level,
        index=first.index,
        warmup=first.warmup,
        t_start=min(w.t_start for w in windows),
        t_end=max(w.t_end for w in windows),
        server=server,
        stable_so_far=stable_so_far,
        sequence=merged_sequence([w.sequence for w in windows]),
        others_cpu=largest_known([w.others_cpu for w in windows]),
        steal=largest_known([w.steal for w in windows]),
        **summed(windows, [name for name, _ in parts]),
    )


def stable_tail(windows: Sequence[WindowResult], stable_windows: int, percent: float) -> int | None:
    """Where the last run of ``stable_windows`` merged windows that agree ends (exclusive), the
    latest first; None when no run of them agrees."""
    throughputs = [w.throughput_rps for w in windows]
    latencies = [w.latency.mean for w in windows]
    for end in range(len(windows), stable_windows - 1, -1):
        if is_stable(throughputs[:end], latencies[:end], stable_windows, percent):
            return end
    return None


def merged_status(host_statuses: Sequence[LevelStatus], stable: bool) -> LevelStatus:
    """The level's status: the worst a host had (failed, interrupted, contended), else whether
    the merged windows agree."""
    for status in _WORST_FIRST:
        if status in host_statuses:
            return status
    return "stable" if stable else "unstable"


def host_result(rank: int, name: str, windows: Sequence[WindowResult], batch_size: int, audit: ClientAudit,
                share: float, open_loop: bool, offset_s: float | None, rtt_s: float | None,
                missing: str = "") -> HostResult:
    """One host's figures over the level's chosen windows (its throughput over their length)."""
    requests = sum(w.requests for w in windows)
    duration = sum(w.t_end - w.t_start for w in windows)
    return HostResult(
        rank=rank, name=name,
        connections=0 if open_loop else int(share), target_rate=share if open_loop else None,
        requests=requests, errors=sum(w.errors for w in windows),
        throughput_rps=requests / duration if duration > 0 else 0.0,
        throughput_ips=requests * batch_size / duration if duration > 0 else 0.0,
        latency=merged_latency([w.latency for w in windows]),
        audit=audit, clock_offset_s=offset_s, clock_rtt_s=rtt_s, missing=missing,
    )
