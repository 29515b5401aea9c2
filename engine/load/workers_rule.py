"""How many load worker processes a sweep uses when the profile leaves it to us (load.workers = 0)."""

from __future__ import annotations

from engine.profiles import Load


def choose_workers(load: Load, cpu_count: int) -> int:
    if load.workers > 0:
        return load.workers
    return 1
