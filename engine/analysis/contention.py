"""When a level's figures cannot be trusted because of the box, not the server: others took the
CPU (contended), its windows did not agree (unstable), or it is out of line with the level below
it (throughput falling while the load rises, or p99 falling, beyond the measured spread). Such a
level is measured again (engine/load/sweep.py); these rules say when and why, in words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from engine.events import LevelStatus

CONTENDED: LevelStatus = "contended"


def mean_share(values: Sequence[float | None]) -> float | None:
    """The mean of the shares that were measured; None when none was."""
    known = [v for v in values if v is not None]
    return fmean(known) if known else None


def is_contended(others: float | None, steal: float | None, contended_percent: float) -> bool:
    """Others' CPU share plus the hypervisor's steal above ``contended_percent`` of the cores."""
    if contended_percent >= 100.0:  # the rule switched off
        return False
    taken = (others or 0.0) + (steal or 0.0)
    return (others is not None or steal is not None) and taken * 100.0 > contended_percent


def contention_words(others: float | None, steal: float | None) -> str:
    parts = []
    if others is not None:
        parts.append(f"others took {others * 100:.0f} % of the CPU")
    if steal is not None and steal >= 0.01:
        parts.append(f"{steal * 100:.0f} % stolen")
    return ", ".join(parts) or "CPU taken by others"


def spread(values: Sequence[float]) -> float:
    """(max - min) / mean of a level's merged windows' throughputs: how far they disagreed."""
    good = [v for v in values if v > 0]
    if len(good) < 2:
        return 0.0
    return (max(good) - min(good)) / fmean(good)


@dataclass(frozen=True)
class LevelFigures:
    level: float
    throughput: float
    p99: float | None
    spread: float  # its windows' throughput spread (see ``spread``)


def out_of_line(below: LevelFigures, this: LevelFigures, stability_percent: float) -> tuple[str, str]:
    """(which level to measure again: "this" or "below", why) when ``this`` level, above
    ``below``, breaks the trend beyond the larger of their spreads and the stability rule;
    ("", "") otherwise. Throughput falling while load rises points at this level; p99 falling
    points at the level below (its tail was the noise)."""
    if this.level <= below.level or below.throughput <= 0:
        return "", ""
    allowed = max(stability_percent / 100.0, below.spread, this.spread)
    if this.throughput < below.throughput * (1 - allowed):
        fell = 1 - this.throughput / below.throughput
        return "this", (f"throughput fell {fell * 100:.0f} % from level {below.level:g} while the load rose "
                        f"(spread {allowed * 100:.0f} %)")
    if below.p99 is not None and this.p99 is not None and below.p99 > 0 and this.p99 < below.p99 * (1 - allowed):
        fell = 1 - this.p99 / below.p99
        return "below", (f"p99 fell {fell * 100:.0f} % at level {this.level:g} while the load rose "
                         f"(spread {allowed * 100:.0f} %)")
    return "", ""
