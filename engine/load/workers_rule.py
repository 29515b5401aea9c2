"""How many load worker processes a sweep starts, and how many a level uses.

Measured on the 2-core development box (identity model, embedded Triton on the same machine):
one worker spends about 50 us of CPU per request (most of it in the kernel's loopback
send/recv, not in Python: py-spy shows transport.write and the read callback dominating), so a
single event loop sustains well over 10 000 small requests/s. At concurrency 8, 32 and 128 one
worker gave the same or better throughput and p50 than two (bench notes in the load report):
on a small box a second worker only takes CPU from the server it measures.

Rule, when load.workers = 0:
* pool size: a quarter of the client's cores (at least 1), leaving the rest to the server's
  HTTP threads and Python backend stubs (embedded) or the session and TUI;
* a concurrency level uses one worker per 32 requests in flight (1..32 -> 1), a rate level
  one worker per 5000 requests/s, never more than the pool (each mode's ``per_worker`` in
  engine/modes.py).
When load.workers is set, the pool has that many and every level uses them all (a concurrency
level never more workers than requests in flight). A client-bound level (see audit.py) says
when more workers would help.
"""

from __future__ import annotations

from engine.modes import mode_of
from engine.profiles import Load


def pool_size(load: Load, cpu_count: int) -> int:
    if load.workers > 0:
        return load.workers
    return max(1, cpu_count // 4)


def workers_for_level(load: Load, level: float, pool: int) -> int:
    """The mode's share per worker is its strategy's ``per_worker`` (engine/modes.py)."""
    return mode_of(load.mode).workers_wanted(level, pool, fixed=load.workers > 0)
