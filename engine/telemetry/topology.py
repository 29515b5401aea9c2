"""How the local GPUs reach each other: P2P status, PCIe common ancestor, NVLink links.

``read_topology`` asks NVML (blocking: sampler thread only); ``summarize_topology`` is a pure
function that turns the result into the one line the probe and the reports quote to explain
scaling ("4x NVIDIA H200, NVLink x18 between every pair").
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from engine import libnvml
from engine.events import GpuLink, Topology
from engine.telemetry.nvml_gpus import NvmlDevice

# nvmlGpuTopologyLevel_t -> the names nvidia-smi topo -m uses, nearest first
ANCESTOR_NAMES = {0: "INTERNAL", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
ANCESTOR_ORDER = ["INTERNAL", "PIX", "PXB", "PHB", "NODE", "SYS"]

# nvmlGpuP2PStatus_t
P2P_STATUS_NAMES = {
    0: "ok",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by regkey",
    5: "not supported",
    6: "unknown",
}


def p2p_usable(link: GpuLink) -> bool | None:
    """True when NVML says direct reads or writes work; None when NVML could not tell."""
    statuses = [s for s in (link.p2p_read, link.p2p_write) if s is not None]
    if not statuses:
        return None
    return "ok" in statuses


def _gpu_info(nv: Any, d: NvmlDevice, gpu_pcis: set[tuple[int, int, int]]) -> dict[str, Any]:
    def ask(fn_name: str) -> Any:
        return None if d.lost else libnvml.query(nv, fn_name, d.handle)

    mem = ask("nvmlDeviceGetMemoryInfo")
    return {
        "uuid": d.uuid,
        "index": d.index,
        "name": d.name,
        "bus_id": d.bus_id,
        "mig": d.mig,
        "mem_total": int(mem.total) if mem is not None else None,
        "pcie_gen": ask("nvmlDeviceGetCurrPcieLinkGeneration"),
        "pcie_width": ask("nvmlDeviceGetCurrPcieLinkWidth"),
        "pcie_gen_max": ask("nvmlDeviceGetMaxPcieLinkGeneration"),  # what the GPU and slot can do
        "pcie_width_max": ask("nvmlDeviceGetMaxPcieLinkWidth"),
        "nvlink_links_up": len(d.nvlinks),
        "nvlink_to_gpu": sum(1 for p in d.nvlinks if p.remote_pci in gpu_pcis and p.remote_type != "switch"),
        "nvlink_to_switch": _switch_links(d, gpu_pcis)[0],
    }


def _switch_links(d: NvmlDevice, gpu_pcis: set[tuple[int, int, int]]) -> tuple[int, int]:
    """(links to an NVSwitch for certain, links whose far end is unknown and is no GPU here)."""
    sure = sum(1 for p in d.nvlinks if p.remote_type == "switch")
    maybe = sum(1 for p in d.nvlinks if p.remote_type == "unknown" and p.remote_pci not in gpu_pcis)
    return sure, maybe


def _nvlink_count(a: NvmlDevice, b: NvmlDevice, gpu_pcis: set[tuple[int, int, int]], p2p_nvlink: str | None) -> int:
    """Links from a straight to b; through NVSwitch every link reaches every GPU, so a
    switched pair counts the links both sides have (what nvidia-smi topo -m shows as NV18)."""
    direct = sum(1 for p in a.nvlinks if b.pci is not None and p.remote_pci == b.pci and p.remote_type != "switch")
    if direct:
        return direct
    sure_a, maybe_a = _switch_links(a, gpu_pcis)
    sure_b, maybe_b = _switch_links(b, gpu_pcis)
    if sure_a and sure_b:
        return min(sure_a, sure_b)
    if maybe_a and maybe_b and p2p_nvlink == "ok":  # an older driver that cannot name the far end
        return min(sure_a + maybe_a, sure_b + maybe_b)
    return 0


def read_topology(nv: Any, devices: list[NvmlDevice], ts: float | None = None) -> Topology:
    gpu_pcis = {d.pci for d in devices if d.pci is not None}
    gpus = [_gpu_info(nv, d, gpu_pcis) for d in devices]
    links: list[GpuLink] = []
    caps = [
        ("p2p_read", libnvml.const(nv, "NVML_P2P_CAPS_INDEX_READ", 0)),
        ("p2p_write", libnvml.const(nv, "NVML_P2P_CAPS_INDEX_WRITE", 1)),
        ("p2p_nvlink", libnvml.const(nv, "NVML_P2P_CAPS_INDEX_NVLINK", 2)),
    ]
    for a, b in itertools.combinations(devices, 2):
        status: dict[str, str | None] = {}
        for field_name, cap in caps:
            try:
                code = nv.nvmlDeviceGetP2PStatus(a.handle, b.handle, cap)
                status[field_name] = P2P_STATUS_NAMES.get(int(code), f"status {int(code)}")
            except nv.NVMLError:
                status[field_name] = None
        try:
            ancestor = ANCESTOR_NAMES.get(int(nv.nvmlDeviceGetTopologyCommonAncestor(a.handle, b.handle)))
        except nv.NVMLError:
            ancestor = None
        links.append(
            GpuLink(
                a=a.uuid,
                b=b.uuid,
                nvlink_count=_nvlink_count(a, b, gpu_pcis, status["p2p_nvlink"]),
                common_ancestor=ancestor,
                **status,
            )
        )
    event = Topology(gpus=gpus, links=links, summary=summarize_topology(gpus, links))
    if ts is not None:
        event.ts = ts
    return event


# --------------------------------------------------------------------------- the one line


def _names(gpus: list[dict[str, Any]]) -> str:
    counts = Counter(g.get("name") or "unknown GPU" for g in gpus)
    return " + ".join(f"{n}x {name}" for name, n in counts.items())


def _pcie(gpus: list[dict[str, Any]]) -> str | None:
    gens = {g.get("pcie_gen_max") or g.get("pcie_gen") for g in gpus}
    widths = {g.get("pcie_width_max") or g.get("pcie_width") for g in gpus}
    if None in gens or None in widths or len(gens) != 1 or len(widths) != 1:
        return None
    return f"Gen{gens.pop()} x{widths.pop()}"


def _worst_ancestor(links: list[GpuLink]) -> str | None:
    known = [link.common_ancestor for link in links if link.common_ancestor in ANCESTOR_ORDER]
    return max(known, key=ANCESTOR_ORDER.index) if known else None


def summarize_topology(gpus: list[dict[str, Any]], links: list[GpuLink]) -> str:
    if not gpus:
        return "no NVIDIA GPU visible to NVML"
    head = _names(gpus)
    pcie = _pcie(gpus)
    if len(gpus) == 1:
        return f"{head}, PCIe {pcie}" if pcie else head
    pairs = len(links)
    nv = [link for link in links if link.nvlink_count > 0]
    switched = any(g.get("nvlink_to_switch") for g in gpus)
    if nv and len(nv) == pairs:
        counts = sorted({link.nvlink_count for link in nv})
        width = f"x{counts[0]}" if len(counts) == 1 else f"x{counts[0]}-x{counts[-1]}"
        return f"{head}, NVLink {width} between every pair" + (" (NVSwitch)" if switched else "")
    rest = [link for link in links if link.nvlink_count == 0]
    usable = [p2p_usable(link) for link in rest]
    if nv:
        if all(u is True for u in usable):
            tail = "the rest over PCIe with P2P"
        elif all(u is False for u in usable):
            tail = "the rest over PCIe without P2P (through host memory)"
        else:
            tail = "the rest over PCIe"
        return f"{head}, NVLink between {len(nv)} of {pairs} pairs, {tail}"
    where = f"PCIe only ({pcie})" if pcie else "PCIe only"
    if all(u is True for u in usable):
        ancestor = _worst_ancestor(links)
        return f"{head}, {where}, P2P between every pair" + (f" (farthest path {ancestor})" if ancestor else "")
    if all(u is False for u in usable):
        return f"{head}, {where}, no P2P: NCCL goes through host memory"
    if all(u is None for u in usable):
        return f"{head}, {where}, P2P status unknown"
    ok = sum(1 for u in usable if u)
    return f"{head}, {where}, P2P between {ok} of {pairs} pairs; the rest go through host memory"
