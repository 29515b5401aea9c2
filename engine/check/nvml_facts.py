"""The idle facts of every visible GPU and pair, through NVML (blocking; a few ms per GPU).

Enumeration, identity and NVLink links come from the telemetry reader (NvmlGpus), pairs from
its topology reader: the check and the session's telemetry see the same GPUs the same way.
NVML sees every GPU of the machine; the check keeps those CUDA_VISIBLE_DEVICES leaves.
A field a GPU does not support is None, never an exception.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import libnvml
from engine.check.facts import GpuFacts, PairFacts
from engine.events import Event, Topology, Warning
from engine.telemetry.nvml_gpus import NvmlDevice, NvmlGpus
from engine.telemetry.once import WarnOnce
from engine.telemetry.topology import p2p_usable, read_topology

# nvmlClocksEventReason*: the functions were renamed in driver 535; older bindings lack the new one
_THROTTLE_FUNCTIONS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


def _asker(nv: Any, handle: Any) -> Callable[..., Any]:
    """ask(fn_name, *args): one NVML answer about this GPU, None where there is none."""

    def ask(fn_name: str, *args: Any) -> Any:
        return libnvml.query(nv, fn_name, handle, *args)

    return ask


def _own_pids() -> set[int]:
    """This process and its children: the check's own CUDA work is no other tenant."""
    pids = {os.getpid()}
    try:
        import psutil

        pids |= {p.pid for p in psutil.Process().children(recursive=True)}
    except Exception:
        pass
    return pids


def read_gpu_facts(nv: Any, d: NvmlDevice, own: set[int]) -> GpuFacts:
    ask = _asker(nv, d.handle)
    g = GpuFacts(index=d.index, uuid=d.uuid, name=d.name, bus_id=d.bus_id, mig=d.mig, nvlink_links_up=len(d.nvlinks))
    mem = ask("nvmlDeviceGetMemoryInfo")
    if mem is not None:
        g.mem_total, g.mem_used = int(mem.total), int(mem.used)
    util = ask("nvmlDeviceGetUtilizationRates")
    g.util_gpu = float(util.gpu) if util is not None else None
    g.pcie_gen = ask("nvmlDeviceGetCurrPcieLinkGeneration")
    g.pcie_width = ask("nvmlDeviceGetCurrPcieLinkWidth")
    g.pcie_gen_max = ask("nvmlDeviceGetMaxPcieLinkGeneration")
    g.pcie_width_max = ask("nvmlDeviceGetMaxPcieLinkWidth")
    g.pcie_gen_gpu_max = ask("nvmlDeviceGetGpuMaxPcieLinkGeneration")
    limit, default = ask("nvmlDeviceGetEnforcedPowerLimit"), ask("nvmlDeviceGetPowerManagementDefaultLimit")
    g.power_limit_w = limit / 1000.0 if limit is not None else None
    g.power_default_w = default / 1000.0 if default is not None else None
    for fn_name in _THROTTLE_FUNCTIONS:
        bits = ask(fn_name)
        if bits is not None:
            g.throttle_reasons = int(bits)
            break
    temp = ask("nvmlDeviceGetTemperature", libnvml.const(nv, "NVML_TEMPERATURE_GPU", 0))
    g.temp_c = float(temp) if temp is not None else None
    slowdown = ask("nvmlDeviceGetTemperatureThreshold", libnvml.const(nv, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1))
    g.temp_slowdown_c = float(slowdown) if slowdown else None
    ecc = ask("nvmlDeviceGetEccMode")
    if ecc is not None:
        g.ecc_enabled = bool(ecc[0])
        if g.ecc_enabled:
            errors = ask("nvmlDeviceGetTotalEccErrors", libnvml.const(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                         libnvml.const(nv, "NVML_VOLATILE_ECC", 0))
            g.ecc_uncorrected = int(errors) if errors is not None else None
    pending = ask("nvmlDeviceGetRetiredPagesPendingStatus")
    g.retired_pending = bool(pending) if pending is not None else None
    remap = ask("nvmlDeviceGetRemappedRows")  # (corrected rows, uncorrected rows, pending, failed)
    if remap is not None:
        g.remap_pending, g.remap_failed = bool(remap[2]), bool(remap[3])
    g.processes = _foreign_processes(nv, d, own)
    return g


def _foreign_processes(nv: Any, d: NvmlDevice, own: set[int]) -> list[dict[str, Any]]:
    ask = _asker(nv, d.handle)
    seen: dict[int, dict[str, Any]] = {}
    for fn_name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        for proc in ask(fn_name) or []:
            pid = int(proc.pid)
            if pid in own or pid in seen:
                continue
            used = getattr(proc, "usedGpuMemory", None)
            seen[pid] = {"pid": pid, "name": libnvml.process_name(nv, pid), "mem_used": int(used) if used is not None else None}
    return list(seen.values())


def pairs_from_topology(topology: Topology, index_of: dict[str, int]) -> list[PairFacts]:
    """The pairs of the GPUs in ``index_of`` (UUID -> index); links to others are left out."""
    pairs = []
    for link in topology.links:
        if link.a not in index_of or link.b not in index_of:
            continue
        usable = p2p_usable(link)
        bad = next((s for s in (link.p2p_read, link.p2p_write) if s not in (None, "ok")), None)
        pairs.append(PairFacts(a=index_of[link.a], b=index_of[link.b], nvlink_count=link.nvlink_count,
                               p2p=True if link.nvlink_count else usable,
                               p2p_status=None if usable else bad, common_ancestor=link.common_ancestor))
    return pairs


@dataclass
class IdleFacts:
    gpus: list[GpuFacts] = field(default_factory=list)  # the visible GPUs, by machine index
    pairs: list[PairFacts] = field(default_factory=list)
    topology: Topology | None = None  # the whole machine's
    error: str | None = None  # why there is no GPU
    machine_gpus: int = 0  # GPUs NVML counts, visible or not
    cuda_visible: str | None = None  # CUDA_VISIBLE_DEVICES as set; None: unset
    unknown: str | None = None  # its first entry that names no GPU here (libnvml.visible_indices)


def read_idle_facts(nvml: Any = None) -> IdleFacts:
    """The GPUs CUDA_VISIBLE_DEVICES leaves to this process (NVML sees them all), their pairs,
    and why there is no GPU. ``nvml``: a stand-in for unit tests."""
    reasons: list[str] = []

    def keep(e: Event) -> None:  # WarnOnce publishes Warnings only
        if isinstance(e, Warning):
            reasons.append(e.message)

    gpus = NvmlGpus(WarnOnce(keep), nvml=nvml)
    setting = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not gpus.open():
        return IdleFacts(error=(reasons[0] if reasons else "NVML found no GPU").split(": local GPU values")[0],
                         cuda_visible=setting)
    try:
        nv = gpus.nvml
        uuids = [""] * gpus.count
        for d in gpus.devices:
            uuids[d.index] = d.uuid
        seen = libnvml.visible_indices(setting, uuids)
        shown = set(seen.indices) if seen is not None else {d.index for d in gpus.devices}  # None: MIG, all
        devices = [d for d in gpus.devices if d.index in shown]
        idle = IdleFacts(machine_gpus=gpus.count, cuda_visible=setting, unknown=seen.unknown if seen else None)
        if not devices:
            idle.error = f"CUDA_VISIBLE_DEVICES={setting!r} leaves none of this machine's {gpus.count} GPUs"
            return idle
        own = _own_pids()
        idle.gpus = [read_gpu_facts(nv, d, own) for d in devices]
        # every GPU: an NVLink's far end is known as a GPU only among them
        idle.topology = read_topology(nv, gpus.devices)
        idle.pairs = pairs_from_topology(idle.topology, {d.uuid: d.index for d in devices})
        return idle
    finally:
        gpus.close()
