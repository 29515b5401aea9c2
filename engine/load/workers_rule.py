"""How many load worker processes a sweep starts, and how many a level uses.

One worker's event loop sustains well over 10 000 small requests/s, and on a small box a
second worker only takes CPU from the server it measures; but the kernel's loopback copy of each
request body is paid by the sending process, so bytes, not requests, load a worker. What was
measured: docs/results/load_engine_design_notes.md, "How many load workers".

Rule, when load.workers = 0:
* pool size: a quarter of the client's cores (at least 1), leaving the rest to the server's
  HTTP threads and Python backend stubs (embedded) or the session and TUI;
* a concurrency level uses one worker per 32 requests in flight (1..32 -> 1), a rate level
  one worker per 5000 requests/s, never more than the pool (each mode's ``per_worker`` in
  engine/modes.py);
* large requests get proportionally more workers: the share per worker shrinks by
  BODY_SHARE_BYTES / request bytes (floors: 4 connections, 500 requests/s per worker).
When load.workers is set, the pool has that many and every level uses them all (a concurrency
level never more workers than requests in flight). A client-bound level (see audit.py) says
when more workers would help.
"""

from __future__ import annotations

from engine.modes import mode_of
from engine.profiles import Load

BODY_SHARE_BYTES = 64 * 1024  # up to this request size a worker carries its mode's full share
MIN_SHARE_CONCURRENCY = 4.0  # connections per worker, however large the request
MIN_SHARE_RATE = 500.0  # requests/s per worker, however large the request


def pool_size(load: Load, cpu_count: int) -> int:
    if load.workers > 0:
        return load.workers
    return max(1, cpu_count // 4)


def workers_for_level(load: Load, level: float, pool: int, request_bytes: int = 0) -> int:
    """The mode's share per worker is its strategy's ``per_worker`` (engine/modes.py), smaller
    for requests larger than BODY_SHARE_BYTES."""
    mode = mode_of(load.mode)
    share = mode.per_worker
    if request_bytes > BODY_SHARE_BYTES:
        floor = MIN_SHARE_RATE if mode.open_loop else MIN_SHARE_CONCURRENCY
        share = max(floor, share * BODY_SHARE_BYTES / request_bytes)
    return mode.workers_wanted(level, pool, fixed=load.workers > 0, per_worker=share)
