"""Values from a server we do not control (Triton's statistics, its /metrics page), checked
before they become figures: a value that is not a finite number, negative where it cannot be,
or beyond anything a device reports is dropped (None) and named, never recorded (pure).

Why: such values come from a buggy or hostile server; taken as they are, one stops the
recording (an integer too large for SQLite) or shows a queue time of minus centuries.
"""

from __future__ import annotations

import math
from typing import Any

MAX_COUNTER = 2**62  # Triton's cumulative uint64 counters, with room for a difference of two
# the largest value a GPU gauge can take, in our units (percent, bytes, watts, joules)
GAUGE_LIMITS: dict[str, float] = {
    "util_gpu": 100.0,
    "mem_used": 2.0**50,  # 1 PiB
    "mem_total": 2.0**50,
    "power_w": 100_000.0,
    "power_limit_w": 100_000.0,
    "energy_j": 1e15,  # 30 years at 1 MW
}
UTIL_SLACK = 1.0  # a rounding above 100 % is still a reading


def is_number(value: Any) -> bool:
    """A finite int or float (bool is not a number here, as in JSON)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def counter(value: Any) -> int | None:
    """A cumulative counter: a whole number from 0 to MAX_COUNTER (JSON may give 12.0), or None."""
    if not is_number(value) or value < 0 or value > MAX_COUNTER or value != int(value):
        return None
    return int(value)


def gauge(field_name: str, value: float) -> float | None:
    """A GPU gauge in our units, or None when no device reports such a value."""
    if not is_number(value) or value < 0:
        return None
    limit = GAUGE_LIMITS.get(field_name, math.inf)
    if value > limit + (UTIL_SLACK if field_name == "util_gpu" else 0.0):
        return None
    return min(value, limit)


def server_time(per_request_s: float | None, client_mean_s: float | None, slack: float = 0.1) -> float | None:
    """A server's per-request time, or None when it cannot be: negative, or above the client's own
    mean latency over the same interval (which contains it) by more than ``slack`` of it plus 1 ms
    (the two intervals' edges differ by a tick)."""
    if per_request_s is None:
        return None
    if not is_number(per_request_s) or per_request_s < 0:
        return None
    if client_mean_s is not None and per_request_s > client_mean_s * (1 + slack) + 1e-3:
        return None
    return per_request_s


LATE_SHARE = 0.25  # a reading this far (share of the interval) from its edge spans another interval


def read_at_edge(asked_ns: int, answered_ns: int, edge_ns: int, interval_ns: int) -> bool:
    """Whether a server reading asked at ``asked_ns`` and answered at ``answered_ns`` stands for
    the edge ``edge_ns`` of an interval ``interval_ns`` long: asked no earlier and answered no
    later than LATE_SHARE of it from the edge. Why: on a loaded machine a reply that comes most
    of a window late makes the window's counters cover a different interval."""
    slack = LATE_SHARE * interval_ns
    return edge_ns - asked_ns <= slack and answered_ns - edge_ns <= slack


TIMED_OUT_SHARE = 0.9  # a read that gave nothing after this share of its timeout timed out


def gave_up(waited_s: float, timeout_s: float) -> bool:
    """Whether a server read that answered None after ``waited_s`` timed out, rather than found
    nothing: a server without the counters answers None at once, one that stalls near the timeout."""
    return waited_s >= TIMED_OUT_SHARE * timeout_s
