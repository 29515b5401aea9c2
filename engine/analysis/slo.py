"""The latency target of a scaling study and the search for the highest load that meets it.

Like perf_analyzer's ``--latency-threshold --binary-search``: after the planned levels, bisect
between the highest level that met the target and the lowest one above it that did not, until
the bracket is tight (``resolution``) or ``max_steps`` search levels have run. Stateless: the
next level is a function of what has been measured, so a search resumes from any point and the
tests need no server.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.errors import UserError

PERCENTILES = ("p50", "p95", "p99")
_SLO = re.compile(r"^\s*(p50|p95|p99)\s*=\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*$", re.I)
DEFAULT_SEARCH_STEPS = 4
RELATIVE_RESOLUTION = 0.05  # a bracket narrower than 5 % of its lower end is tight enough


@dataclass(frozen=True)
class Slo:
    percentile: str  # "p50", "p95", "p99"
    target_s: float

    def __str__(self) -> str:
        return f"{self.percentile}={self.target_s * 1000:g}ms"


def parse_slo(text: str) -> Slo:
    """"p99=50ms", "p95=0.2s", "p50=20" (milliseconds when no unit is given)."""
    match = _SLO.match(text or "")
    if match is None:
        raise UserError(f"--slo {text!r}: expected PERCENTILE=TARGET with PERCENTILE one of "
                        f"{', '.join(PERCENTILES)}, e.g. p99=50ms")
    value = float(match.group(2)) * (1.0 if (match.group(3) or "ms").lower() == "s" else 1e-3)
    if not value > 0 or not math.isfinite(value):
        raise UserError(f"--slo {text!r}: the target must be a time > 0")
    return Slo(match.group(1).lower(), value)


@dataclass(frozen=True)
class Measured:
    """One level's outcome for the search: its latency at the SLO's percentile, None when the
    level failed or completed nothing (counts as missing the target)."""

    level: float
    latency_s: float | None
    throughput: float = 0.0  # images/s, for the reported SLO point

    def meets(self, target_s: float) -> bool:
        return self.latency_s is not None and self.latency_s <= target_s


def bracket(points: Sequence[Measured], target_s: float) -> tuple[float | None, float | None]:
    """(highest level meeting the target below the lowest level missing it, that lowest level).
    Either may be None: nothing met it, or nothing missed it."""
    missed = [p.level for p in points if not p.meets(target_s)]
    bad = min(missed) if missed else None
    good = [p.level for p in points if p.meets(target_s) and (bad is None or p.level < bad)]
    return (max(good) if good else None), bad


def next_search_level(points: Sequence[Measured], target_s: float, *, integer: bool = True,
                      steps_done: int = 0, max_steps: int = DEFAULT_SEARCH_STEPS,
                      floor: float | None = None) -> float | None:
    """The next level to measure, or None when the search is done: no level missed the target
    (the point is the highest level, the sweep did not bound it), the bracket is tight, or the
    step budget is spent. ``integer``: concurrency (whole requests in flight; the lowest is 1);
    otherwise a request rate (the lowest is ``floor`` or half the lowest level measured)."""
    if steps_done >= max_steps or not points:
        return None
    good, bad = bracket(points, target_s)
    if bad is None:
        return None
    lowest = 1.0 if integer else (floor if floor is not None else min(p.level for p in points) / 2)
    if good is None:
        if bad <= lowest:
            return None  # even the least load misses the target
        lo = lowest - (1.0 if integer else 0.0)  # the lowest level itself is still a candidate
    else:
        lo = good
    gap = bad - lo
    if gap <= max(1.0 if integer else 0.0, RELATIVE_RESOLUTION * max(lo, 0.0)):
        return None
    mid = (lo + bad) / 2
    if integer:
        mid = float(math.floor(mid))
        if mid <= lo or mid >= bad:
            return None
    measured = {p.level for p in points}
    return None if mid in measured else mid


@dataclass(frozen=True)
class SloPoint:
    level: float | None  # None: no level met the target
    throughput: float | None
    latency_s: float | None
    bounded: bool  # a higher level missed the target (False: the sweep never reached the limit)


def slo_point(points: Sequence[Measured], target_s: float) -> SloPoint:
    """The most throughput within the target: of the levels that met it below the lowest level
    that missed it, the one that served the most (the highest such level on a tie).

    Not simply the highest level that met it (the search's boundary): past a peak, throughput
    can fall while latency still meets the target (docs/results/design_notes.md has a study
    where it did); what a capacity plan wants at the target is the most throughput."""
    good, bad = bracket(points, target_s)
    if good is None:
        return SloPoint(None, None, None, bad is not None)
    within = [p for p in points if p.meets(target_s) and p.level <= good]
    best = max(within, key=lambda p: (p.throughput, p.level))
    return SloPoint(best.level, best.throughput, best.latency_s, bad is not None)
