"""The saturation point of a sweep: the load beyond which more load stops helping.

Definition: over the levels that produced a result, sorted by load, the saturation point is the
lowest level whose throughput is within ``tolerance`` (5 %) of the sweep's maximum throughput.
It is reached only when a higher level was measured after it; when it is the highest level
measured, throughput was still rising at the end of the sweep and the point lies beyond it.
Levels measured above the usable ones but left out (the load generator was the limit there) are
named, so that "the highest level" is never said of a level that was not the sweep's highest.
A level whose measurement windows never agreed (unstable) is marked wherever it is named.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

DEFAULT_TOLERANCE = 0.05
UNSTABLE_MARK = "an unstable level: its windows did not agree"


@dataclass(frozen=True)
class Saturation:
    level: float | None  # the saturation point; None when not reached within the sweep
    throughput: float | None  # at that level
    max_level: float  # the level with the highest throughput
    max_throughput: float
    reached: bool
    tolerance: float
    left_out_above: tuple[float, ...] = ()  # levels above the last usable one, left out (client-bound)
    unstable: tuple[float, ...] = ()  # of level and max_level, those that were not stable

    def _mark(self, level: float | None) -> str:
        return f" ({UNSTABLE_MARK})" if level is not None and level in self.unstable else ""

    def describe(self, unit: str = "concurrency") -> str:
        pct = f"{self.tolerance * 100:g} %"
        if self.reached:
            peak_mark = f"; {UNSTABLE_MARK}" if self.max_level != self.level and self._mark(self.max_level) else ""
            return (f"saturates at {unit} {self.level:g}{self._mark(self.level)}: the first level within {pct} of "
                    f"the peak ({self.max_throughput:.4g}/s at {unit} {self.max_level:g}{peak_mark})")
        if self.left_out_above:
            above = ", ".join(f"{lv:g}" for lv in self.left_out_above)
            return (f"not known: throughput still rising at {unit} {self.max_level:g} "
                    f"({self.max_throughput:.4g}/s{'; ' + UNSTABLE_MARK if self._mark(self.max_level) else ''}), "
                    f"the highest level where the load generator was not the limit; at {unit} {above} it was "
                    "(client-bound), so those levels measured the client")
        return (f"not saturated within the sweep: throughput still rising at its highest {unit}, "
                f"{self.max_level:g} ({self.max_throughput:.4g}/s{'; ' + UNSTABLE_MARK if self._mark(self.max_level) else ''})")


def saturation_point(points: Sequence[tuple[float, float]], tolerance: float = DEFAULT_TOLERANCE,
                     left_out: Sequence[float] = (), unstable: Collection[float] = ()) -> Saturation | None:
    """``points``: (level, throughput) of the levels that produced a result. ``left_out``: levels
    measured but kept out of ``points`` (client-bound). ``unstable``: levels whose windows never
    agreed, marked where named. None when ``points`` is empty."""
    if not 0 <= tolerance < 1:
        raise ValueError("tolerance must be in [0, 1)")
    usable = sorted((float(lv), float(tp)) for lv, tp in points if tp is not None and tp >= 0)
    if not usable:
        return None
    max_level, max_tp = max(usable, key=lambda p: (p[1], -p[0]))
    threshold = (1.0 - tolerance) * max_tp
    level, tp = next(p for p in usable if p[1] >= threshold)
    reached = level != usable[-1][0]
    above = tuple(sorted(float(lv) for lv in left_out if float(lv) > usable[-1][0]))
    return Saturation(
        level=level if reached else None,
        throughput=tp if reached else None,
        max_level=max_level,
        max_throughput=max_tp,
        reached=reached,
        tolerance=tolerance,
        left_out_above=() if reached else above,
        unstable=tuple(lv for lv in (level, max_level) if lv in {float(u) for u in unstable}),
    )
