"""A sweep reduced to what reports and comparisons read: one point per level that produced a
result, its peak, and scaling efficiency level by level against a base run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.analysis.scaling import cost_per_1000, scaling_efficiency, speedup
from engine.events import LevelResult, LevelStatus

LEVEL_MATCH = 1e-9


@dataclass(frozen=True)
class SweepPoint:
    level: float
    throughput: float  # inferences (images) / s
    p50: float | None  # seconds
    p95: float | None
    p99: float | None
    mean: float | None
    status: LevelStatus  # "stable", "unstable", "contended" or "interrupted" (failed levels are not points)


def points_from_results(results: Iterable[LevelResult]) -> list[SweepPoint]:
    """Levels with a usable result, by level. A failed level, one that completed nothing, or a
    degraded one (it measured part of the servers) is no point on a throughput curve."""
    points = [
        SweepPoint(level=float(r.level), throughput=r.throughput_ips, p50=r.latency.p50, p95=r.latency.p95,
                   p99=r.latency.p99, mean=r.latency.mean, status=r.status)
        for r in results
        if r.status != "failed" and r.requests > 0 and not r.degraded
    ]
    return sorted(points, key=lambda p: p.level)


def peak(points: Sequence[SweepPoint]) -> SweepPoint | None:
    """The stable level with the highest throughput (the lower level on a tie): the rule of
    engine/analysis/answer.py, where only sound levels decide (points come from the standing
    results, so a stable point is a sound one). None when no level is stable."""
    stable = [p for p in points if p.status == "stable"]
    if not stable:
        return None
    return max(stable, key=lambda p: (p.throughput, -p.level))


def point_at(points: Sequence[SweepPoint], level: float) -> SweepPoint | None:
    return next((p for p in points if abs(p.level - level) <= LEVEL_MATCH), None)


@dataclass(frozen=True)
class ScalingFigures:
    speedup: float | None  # peak_N / peak_1
    efficiency: float | None  # peak_N / (N x peak_1)
    by_level: dict[float, float | None]  # efficiency at the same concurrency, where both ran it


def scaling_vs_base(run: Sequence[SweepPoint], base: Sequence[SweepPoint], n: int) -> ScalingFigures:
    """Weak scaling of a run on N GPUs against the 1-GPU base run of the same model and config:
    at the peaks (each run at its best concurrency) and level by level."""
    run_peak, base_peak = peak(run), peak(base)
    if run_peak is None or base_peak is None:
        return ScalingFigures(None, None, {})
    by_level: dict[float, float | None] = {}
    for p in run:
        b = point_at(base, p.level)
        by_level[p.level] = scaling_efficiency(p.throughput, b.throughput, n) if b else None
    return ScalingFigures(
        speedup=speedup(run_peak.throughput, base_peak.throughput),
        efficiency=scaling_efficiency(run_peak.throughput, base_peak.throughput, n),
        by_level=by_level,
    )


def cost_at_peak(points: Sequence[SweepPoint], cost_per_hour: float | None) -> float | None:
    """Dollars per 1000 images when the box runs at its best measured throughput."""
    best = peak(points)
    if best is None or not cost_per_hour:
        return None
    return cost_per_1000(cost_per_hour, best.throughput)
