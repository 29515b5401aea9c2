"""Rate mode's arrival processes (load.arrival): the gap before each next send, as a multiple of
the mean gap (1 / the worker's rate), so that every process keeps the level's rate.

- "constant": every gap the mean;
- "poisson": exponential gaps (coefficient of variation 1);
- "gamma": gamma gaps of shape load.burstiness and mean 1, as vLLM's benchmark draws them: a
  burstiness below 1 sends in bursts (coefficient of variation 1/sqrt(burstiness)), 1 is Poisson,
  above 1 is steadier than Poisson;
- "trace": a trace's own gaps (a Mooncake file's timestamps: ``trace_gaps``) over their mean, in
  the trace's order, from the request the worker starts at: the trace's shape at the level's rate
  (a rate of the trace's own replays it as recorded, half of it at half speed). One worker replays
  the trace exactly; several each replay their own stretch of it at their share of the rate.
"""

from __future__ import annotations

import random

ARRIVALS = ("constant", "poisson", "gamma", "trace")


def gap_factor(rng: random.Random, arrival: str, burstiness: float = 1.0) -> float:
    """The next gap over the mean gap."""
    if arrival == "poisson":
        return rng.expovariate(1.0)
    if arrival == "gamma":
        return rng.gammavariate(burstiness, 1.0 / burstiness)
    return 1.0


def trace_gaps(timestamps_s: list[float]) -> tuple[float, ...] | None:
    """Each request's gap to the next over the mean gap (the last one's: the mean); None when the
    timestamps do not advance (no rate to scale)."""
    if len(timestamps_s) < 2 or timestamps_s[-1] <= timestamps_s[0]:
        return None
    mean = (timestamps_s[-1] - timestamps_s[0]) / (len(timestamps_s) - 1)
    gaps = [(b - a) / mean for a, b in zip(timestamps_s, timestamps_s[1:], strict=False)]
    return (*gaps, 1.0)


def trace_rate(timestamps_s: list[float]) -> float | None:
    """The trace's own rate, requests/s (None: its timestamps do not advance)."""
    if len(timestamps_s) < 2 or timestamps_s[-1] <= timestamps_s[0]:
        return None
    return (len(timestamps_s) - 1) / (timestamps_s[-1] - timestamps_s[0])


class TraceGaps:
    """A worker's walk along the trace's gaps, from the request it starts at."""

    __slots__ = ("gaps", "next")

    def __init__(self, gaps: tuple[float, ...], start: int) -> None:
        self.gaps = gaps
        self.next = start % len(gaps) if gaps else 0

    def take(self) -> float:
        if not self.gaps:
            return 1.0
        gap = self.gaps[self.next]
        self.next = self.next + 1 if self.next + 1 < len(self.gaps) else 0
        return gap
