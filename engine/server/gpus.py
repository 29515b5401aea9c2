"""How many GPUs this process may use, without importing torch (slow) just to count them."""

from __future__ import annotations

import os


def visible_gpu_count() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library: no GPU for us
        return 0
    if visible is not None:
        return min(count, len([x for x in visible.split(",") if x.strip()]))
    return count


def smallest_memory_gib(indices: tuple[int, ...]) -> float | None:
    """The memory of the smallest of these GPUs (NVML indices), GiB; None without NVML."""
    if not indices:
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return min(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).total for i in indices) / 2**30
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library, an index it does not know: no figure
        return None
