"""perf_analyzer's stability rule for a level's measurement windows.

A level is stable when, over the last ``stable_windows`` windows, both throughput and mean
latency agree within ``percent``: max / min <= 1 + percent / 100 (perf_analyzer's
IsInferWindowStable / IsLatencyWindowStable, which use the average latency unless told
otherwise). A window with zero throughput is never part of a stable run.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.events import LevelStatus


def spread(values: Sequence[float]) -> float | None:
    """max / min - 1 of positive values; None when any value is missing or not positive."""
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return max(values) / min(values) - 1.0


def within(values: Sequence[float], percent: float) -> bool:
    s = spread(values)
    # a hair of slack so that a ratio of exactly 1 + percent/100 passes despite float rounding
    return s is not None and s <= percent / 100.0 + 1e-12


def is_stable(
    throughputs: Sequence[float],
    latencies: Sequence[float | None],
    stable_windows: int,
    percent: float,
) -> bool:
    """True when the last ``stable_windows`` windows agree on throughput and latency."""
    if stable_windows <= 0:
        raise ValueError("stable_windows must be positive")
    if len(throughputs) < stable_windows or len(latencies) < stable_windows:
        return False
    tail_t = list(throughputs[-stable_windows:])
    tail_l = list(latencies[-stable_windows:])
    return within(tail_t, percent) and within(tail_l, percent)  # type: ignore[arg-type]  # callers drop windows without a mean latency


def none_stable(statuses: Sequence[LevelStatus]) -> str:
    """"" unless levels were measured and none of them was stable; then the line that says so
    (a session's end line, the top of its report). ``statuses``: each level's status."""
    measured = [st for st in statuses if st != "failed"]
    if not measured or "stable" in measured:
        return ""
    return f"no level was stable (0 of {len(statuses)}): measure again before sizing on these figures"
