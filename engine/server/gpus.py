"""How many GPUs this process may use, without importing torch (slow) just to count them."""

from __future__ import annotations

import os

from engine import libnvml


def visible_gpu_count() -> int:
    """GPUs CUDA_VISIBLE_DEVICES leaves us, by libnvml's rule (the box check's); 0 without NVML."""
    found = libnvml.visible()
    if found is not None:
        return len(found.indices)
    # MIG instances: as many as the entries, at most the GPUs
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") or ""
    return min(libnvml.device_count(), len([x for x in visible.split(",") if x.strip()]))


def smallest_memory_gib(indices: tuple[int, ...]) -> float | None:
    """The memory of the smallest of these GPUs (NVML indices), GiB; None without NVML."""
    totals = libnvml.memory_totals(indices) if indices else None
    return min(totals) / 2**30 if totals else None


def pin_value(entry: str) -> str:
    """What CUDA_VISIBLE_DEVICES says to pin a server to one GPU (``entry``: one entry of our own
    list, a machine index or a UUID): the GPU's UUID where NVML knows it. Under MPS a client's
    index counts among the devices its MPS server sees, so a server pinned to "1" whose private
    daemon sees only that GPU asks for a device that does not exist, and starts without MPS; a
    UUID names the same GPU to the daemon and to its clients (NVIDIA's MPS guide)."""
    if not entry.isdigit():
        return entry
    found = libnvml.uuids((int(entry),))
    return found[0] if found else entry
