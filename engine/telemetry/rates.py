"""Rates from cumulative counters (NVLink KiB, network bytes, CPU seconds)."""

from __future__ import annotations


class CounterRate:
    """Turns successive readings of a monotonically increasing counter into a rate per second.

    The first reading only sets the baseline (None). A counter that went backwards (reset,
    wrap, a GPU re-initialised) or a clock that did not advance gives None for that interval
    rather than a negative or infinite rate.
    """

    def __init__(self, scale: float = 1.0) -> None:
        self._scale = scale  # counter unit -> reported unit, e.g. 1024 for KiB -> bytes
        self._last: tuple[float, float] | None = None

    def update(self, value: float, t: float) -> float | None:
        last, self._last = self._last, (value, t)
        if last is None:
            return None
        dv, dt = value - last[0], t - last[1]
        if dt <= 0 or dv < 0:
            return None
        return dv * self._scale / dt

    def reset(self) -> None:
        self._last = None
