"""All-reduce bandwidth arithmetic (nccl-tests' definitions) and physical link limits.

algbw = bytes / time, with GB = 1e9 bytes; all-reduce busbw = algbw x 2(n-1)/n, the figure
comparable to a link's own per-direction bandwidth whatever the number of ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.events import AllReduceRow

MIN_SWEEP_BYTES = 1024
GB = 1e9

# Per-direction GB/s of one NVLink link by generation (a link is 2 x this bidirectional).
NVLINK_GBPS_PER_LINK = {2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
# GPU families by the NVLink generation of their SXM form, and links per GPU there.
NVLINK_FAMILIES: list[tuple[str, int, int]] = [
    ("GB200", 5, 18), ("B200", 5, 18), ("B100", 5, 18),
    ("GH200", 4, 18), ("H200", 4, 18), ("H100", 4, 18), ("H800", 4, 8),
    ("A100", 3, 12), ("A800", 3, 8),
    ("V100", 2, 6),
]
# PCIe per-lane, per-direction GB/s after line coding (Gen3+ 128b/130b).
PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def algbw_gbps(size_bytes: int, time_s: float) -> float:
    return size_bytes / time_s / GB


def allreduce_busbw_gbps(algbw: float, world_size: int) -> float:
    return algbw * 2.0 * (world_size - 1) / world_size


def allreduce_row(size_bytes: int, time_s: float, world_size: int) -> AllReduceRow:
    alg = algbw_gbps(size_bytes, time_s)
    return AllReduceRow(size_bytes=size_bytes, time_s=time_s, algbw_gbps=alg,
                        busbw_gbps=allreduce_busbw_gbps(alg, world_size))


def sweep_sizes(max_bytes: int, min_bytes: int = MIN_SWEEP_BYTES) -> list[int]:
    """Powers of two from min_bytes (1 KiB) up to max_bytes, max_bytes included."""
    if max_bytes < min_bytes:
        return [max_bytes] if max_bytes >= 4 else []
    sizes, size = [], min_bytes
    while size < max_bytes:
        sizes.append(size)
        size *= 2
    sizes.append(max_bytes)
    return sizes


def iterations_for(warm_time_s: float, default_iters: int = 20, budget_s: float = 1.0, min_iters: int = 3) -> int:
    """nccl-tests runs 20 iterations; very slow sizes (large messages on gloo) get fewer,
    so that one size stays near budget_s, but never fewer than min_iters."""
    if warm_time_s <= 0:
        return default_iters
    return max(min_iters, min(default_iters, int(budget_s / warm_time_s)))


@dataclass(frozen=True)
class LinkInfo:
    limit_gbps: float | None
    label: str


def link_limit(
    gpu_name: str | None,
    *,
    nvlink_links: int | None = None,
    pcie_gen: int | None = None,
    pcie_width: int | None = None,
    peer_access: bool | None = None,
) -> LinkInfo:
    """The per-direction physical limit between two GPUs of this kind.

    ``nvlink_links`` is the count of active NVLink links (NVML) where known: 0 means the
    family has NVLink but this box runs over PCIe (a PCIe card, links down). None means
    "not asked": SXM families then get their nominal link count. ``gpu_name`` None = CPU.
    """
    if gpu_name is None:
        return LinkInfo(None, "host memory (gloo)")
    upper = gpu_name.upper()
    family = next((f for f in NVLINK_FAMILIES if f[0] in upper), None)
    is_pcie_card = "PCIE" in upper
    if family is not None and (nvlink_links or (nvlink_links is None and not is_pcie_card)):
        _, gen, nominal = family
        links = nvlink_links or nominal
        return LinkInfo(links * NVLINK_GBPS_PER_LINK[gen], f"NVLink{gen} x{links}")
    pcie = pcie_gen or _guess_pcie_gen(upper)
    width = pcie_width or 16
    suffix = "" if peer_access is not False else " (no P2P: via host memory)"
    if pcie is None or pcie not in PCIE_GBPS_PER_LANE:
        return LinkInfo(None, f"PCIe{suffix}")
    return LinkInfo(PCIE_GBPS_PER_LANE[pcie] * width, f"PCIe Gen{pcie} x{width}{suffix}")


def _guess_pcie_gen(upper_name: str) -> int | None:
    """Only where NVML cannot say: the PCIe generation these families ship with."""
    if any(k in upper_name for k in ("H100", "H200", "B200", "RTX 50")):
        return 5
    if any(k in upper_name for k in ("RTX 40", "RTX 30", "A100", "A10", "A40", "L40", "L4", "RTX 6000")):
        return 4
    return None
