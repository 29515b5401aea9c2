"""How many GPUs this process may use, without importing torch (slow) just to count them."""

from __future__ import annotations

import os

from engine import libnvml


def visible_gpu_count() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    count = libnvml.device_count()  # 0 without a driver or the library: no GPU for us
    if visible is not None:
        return min(count, len([x for x in visible.split(",") if x.strip()]))
    return count


def smallest_memory_gib(indices: tuple[int, ...]) -> float | None:
    """The memory of the smallest of these GPUs (NVML indices), GiB; None without NVML."""
    totals = libnvml.memory_totals(indices) if indices else None
    return min(totals) / 2**30 if totals else None
