"""Local GPUs through NVML (the binding engine/libnvml.py hands out).

Every call here blocks (PCIe throughput alone samples for 20 ms per counter), so this class
is only ever used from the sampler's NVML thread. Degradation rules: a missing library or
driver, a field a GPU does not support, a GPU that falls off the bus — each becomes None in
the readings and one Warning, never an exception out of ``read``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from engine import libnvml
from engine.events import GpuReading
from engine.telemetry.once import WarnOnce
from engine.telemetry.rates import CounterRate

NVLINK_ALL_LINKS = 0xFFFFFFFF  # scopeId that asks NVML for the sum over all links (nvml.h)
KIB = 1024
_QUIET_FIELDS = {"graphics_processes"}  # compute GPUs may not report graphics contexts: not news


@dataclass
class NvLinkPeer:
    link: int
    remote_pci: tuple[int, int, int] | None  # (domain, bus, device) of the far end
    remote_type: str  # "gpu", "switch", "other", "unknown"


@dataclass
class NvmlDevice:
    index: int
    handle: Any
    uuid: str
    name: str | None = None
    bus_id: str | None = None
    pci: tuple[int, int, int] | None = None
    mig: bool | None = None
    nvlinks: list[NvLinkPeer] = field(default_factory=list)  # active links only
    unsupported: set[str] = field(default_factory=set)  # fields not to ask again
    lost: bool = False
    mem_v2: bool = True
    nvlink_aggregate: bool = True  # False: the driver rejects scopeId UINT_MAX, sum per link
    nvlink_tx: CounterRate = field(default_factory=lambda: CounterRate(KIB))
    nvlink_rx: CounterRate = field(default_factory=lambda: CounterRate(KIB))

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.name or self.uuid})"


class NvmlGpus:
    def __init__(self, warn: WarnOnce, nvml: Any = None) -> None:
        self._warn = warn
        self._nvml = nvml  # injected in unit tests; libnvml.binding() otherwise (in open())
        self.devices: list[NvmlDevice] = []
        self.count = 0  # GPUs NVML counts, those left out of devices included
        self.driver_version: str | None = None
        self._open = False
        self._unsupported_now: dict[str, list[NvmlDevice]] = defaultdict(list)

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> bool:
        """Initialise NVML and enumerate GPUs. False (after one Warning) when there is none."""
        if self._nvml is None:
            if libnvml.library_missing():
                self._warn("nvml-unavailable", f"NVML unavailable ({libnvml.NO_LIBRARY}): local GPU values are n/a")
                return False
            try:
                self._nvml = libnvml.binding()
            except libnvml.NvmlMissing as exc:
                self._warn("nvml-missing", f"{exc}: local GPU values are n/a")
                return False
        nv = self._nvml
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            self._warn("nvml-unavailable", f"NVML unavailable ({libnvml.init_reason(nv, exc)}): local GPU values are n/a")
            return False
        except OSError as exc:  # a broken libnvidia-ml install can fail below the binding's checks
            self._warn("nvml-unavailable", f"NVML unavailable ({exc}): local GPU values are n/a")
            return False
        self._open = True
        try:
            self.driver_version = libnvml.text(nv.nvmlSystemGetDriverVersion())
        except nv.NVMLError:
            self.driver_version = None
        try:
            count = nv.nvmlDeviceGetCount()
        except nv.NVMLError as exc:
            self._warn("nvml-unavailable", f"NVML cannot count GPUs ({exc}): local GPU values are n/a")
            self.close()
            return False
        self.count = int(count)
        for index in range(count):
            device = self._open_device(index)
            if device is not None:
                self.devices.append(device)
        if not self.devices:
            self._warn("nvml-no-gpu", "NVML found no usable NVIDIA GPU: local GPU values are n/a")
            self.close()
            return False
        return True

    def close(self) -> None:
        if self._open:
            self._open = False
            libnvml.stop(self._nvml)

    @property
    def nvml(self) -> Any:
        """The NVML binding in use (libnvml's, or a unit test's stand-in)."""
        return self._nvml

    def identity(self) -> dict[str, tuple[int | None, str | None]]:
        return {d.uuid: (d.index, d.name) for d in self.devices}

    def _open_device(self, index: int) -> NvmlDevice | None:
        nv = self._nvml
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
        except nv.NVMLError as exc:
            self._warn(f"nvml-handle:{index}", f"NVML cannot open GPU {index} ({exc}): it is left out")
            return None
        bus_id = pci = None
        try:
            info = nv.nvmlDeviceGetPciInfo(handle)
            bus_id, pci = libnvml.text(info.busId), libnvml.pci_key(info)
        except nv.NVMLError:
            pass
        try:
            uuid = libnvml.text(nv.nvmlDeviceGetUUID(handle))
        except nv.NVMLError:
            uuid = ""
        if not uuid:
            if bus_id is None:
                self._warn(f"nvml-identity:{index}", f"GPU {index} has neither a UUID nor a PCI bus id: it is left out")
                return None
            uuid = f"pci:{bus_id}"  # key by bus id rather than by an index that can change
        try:
            name = libnvml.text(nv.nvmlDeviceGetName(handle))
        except nv.NVMLError:
            name = None
        mig: bool | None = None
        try:
            mig = bool(nv.nvmlDeviceGetMigMode(handle)[0] == nv.NVML_DEVICE_MIG_ENABLE)
        except (nv.NVMLError, AttributeError):
            pass
        device = NvmlDevice(index=index, handle=handle, uuid=uuid, name=name, bus_id=bus_id, pci=pci, mig=mig)
        device.nvlinks = self._active_links(handle)
        return device

    def _active_links(self, handle: Any) -> list[NvLinkPeer]:
        nv = self._nvml
        peers: list[NvLinkPeer] = []
        for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
            try:
                active = nv.nvmlDeviceGetNvLinkState(handle, link)
            except nv.NVMLError as exc:
                # NotSupported on link 0: no NVLink at all; InvalidArgument: past the last link
                if getattr(exc, "value", None) in (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_INVALID_ARGUMENT):
                    break
                continue
            if not active:
                continue
            remote_pci = None
            try:
                remote_pci = libnvml.pci_key(nv.nvmlDeviceGetNvLinkRemotePciInfo(handle, link))
            except nv.NVMLError:
                pass
            remote_type = "unknown"
            try:
                kind = nv.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link)
                remote_type = {
                    nv.NVML_NVLINK_DEVICE_TYPE_GPU: "gpu",
                    nv.NVML_NVLINK_DEVICE_TYPE_SWITCH: "switch",
                    nv.NVML_NVLINK_DEVICE_TYPE_IBMNPU: "other",
                }.get(kind, "unknown")
            except (nv.NVMLError, AttributeError):
                pass
            peers.append(NvLinkPeer(link=link, remote_pci=remote_pci, remote_type=remote_type))
        return peers

    # ------------------------------------------------------------------ sampling

    def read(self) -> list[GpuReading]:
        readings = [self._read_device(d) for d in self.devices]
        self._report_unsupported()
        return readings

    def _call(self, device: NvmlDevice, field_name: str, fn: Any, *args: Any) -> Any:
        """One NVML call for one field; None when it is not available (and why, once)."""
        if device.lost or field_name in device.unsupported:
            return None
        nv = self._nvml
        try:
            return fn(device.handle, *args)
        except nv.NVMLError as exc:
            self._on_error(device, field_name, exc)
            return None

    def _on_error(self, device: NvmlDevice, field_name: str, exc: Any) -> None:
        nv = self._nvml
        value = getattr(exc, "value", None)
        if value == nv.NVML_ERROR_GPU_IS_LOST:
            device.lost = True
            self._warn(
                f"nvml-lost:{device.uuid}",
                f"{device.label} is lost (fell off the bus or was reset): its values are n/a from now on",
            )
        elif value in (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_FUNCTION_NOT_FOUND, nv.NVML_ERROR_NO_PERMISSION):
            # will not change during the run: stop asking, say so once per field
            device.unsupported.add(field_name)
            self._unsupported_now[field_name].append(device)
        else:
            self._warn(f"nvml-error:{field_name}", f"NVML failed reading {field_name} on {device.label} ({exc}): shown as n/a")

    def _report_unsupported(self) -> None:
        for field_name, devices in self._unsupported_now.items():
            if field_name in _QUIET_FIELDS:
                continue
            which = ", ".join(d.label for d in devices)
            mig = " (MIG mode is on: NVML reports per-instance, not per-GPU)" if any(d.mig for d in devices) else ""
            self._warn(f"nvml-unsupported:{field_name}", f"NVML: {field_name} not supported on {which}{mig}: shown as n/a")
        self._unsupported_now.clear()

    def _read_device(self, d: NvmlDevice) -> GpuReading:
        nv = self._nvml
        r = GpuReading(uuid=d.uuid, index=d.index, source="nvml", name=d.name, bus_id=d.bus_id)
        if d.lost:
            return r
        util = self._call(d, "util", nv.nvmlDeviceGetUtilizationRates)
        if util is not None:
            r.util_gpu, r.util_mem = float(util.gpu), float(util.memory)
        mem = self._memory(d)
        if mem is not None:
            r.mem_used, r.mem_total = int(mem.used), int(mem.total)
        power_mw = self._call(d, "power_w", nv.nvmlDeviceGetPowerUsage)
        r.power_w = power_mw / 1000.0 if power_mw is not None else None
        limit_mw = self._call(d, "power_limit_w", nv.nvmlDeviceGetEnforcedPowerLimit)
        r.power_limit_w = limit_mw / 1000.0 if limit_mw is not None else None
        energy_mj = self._call(d, "energy_j", nv.nvmlDeviceGetTotalEnergyConsumption)
        r.energy_j = energy_mj / 1000.0 if energy_mj is not None else None  # since the driver loaded
        get_temp = getattr(nv, "nvmlDeviceGetTemperature", None) or nv.nvmlDeviceGetTemperatureV
        temp = self._call(d, "temp_c", get_temp, nv.NVML_TEMPERATURE_GPU)
        r.temp_c = float(temp) if temp is not None else None
        clock = self._call(d, "sm_clock_mhz", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM)
        r.sm_clock_mhz = float(clock) if clock is not None else None
        r.pcie_gen = self._call(d, "pcie_gen", nv.nvmlDeviceGetCurrPcieLinkGeneration)
        r.pcie_width = self._call(d, "pcie_width", nv.nvmlDeviceGetCurrPcieLinkWidth)
        # KB/s over NVML's own 20 ms sample window (each call blocks that long); KB = 1024 B
        tx = self._call(d, "pcie_tx_bps", nv.nvmlDeviceGetPcieThroughput, nv.NVML_PCIE_UTIL_TX_BYTES)
        rx = self._call(d, "pcie_rx_bps", nv.nvmlDeviceGetPcieThroughput, nv.NVML_PCIE_UTIL_RX_BYTES)
        r.pcie_tx_bps = tx * float(KIB) if tx is not None else None
        r.pcie_rx_bps = rx * float(KIB) if rx is not None else None
        if d.nvlinks:
            r.nvlink_tx_bps, r.nvlink_rx_bps = self._nvlink_rates(d)
        r.processes = self._processes(d)
        if d.lost:  # lost during this read: nothing above can be trusted as a whole
            return GpuReading(uuid=d.uuid, index=d.index, source="nvml", name=d.name, bus_id=d.bus_id)
        return r

    def _memory(self, d: NvmlDevice) -> Any:
        nv = self._nvml
        if d.mem_v2 and hasattr(nv, "nvmlMemory_v2") and "memory" not in d.unsupported and not d.lost:
            try:
                # v2 leaves out driver-reserved memory, as nvidia-smi does
                return nv.nvmlDeviceGetMemoryInfo(d.handle, version=nv.nvmlMemory_v2)
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) == nv.NVML_ERROR_GPU_IS_LOST:
                    self._on_error(d, "memory", exc)
                    return None
                d.mem_v2 = False  # an older driver: fall back to v1 for good
            except TypeError:  # an older binding without the version argument
                d.mem_v2 = False
        return self._call(d, "memory", nv.nvmlDeviceGetMemoryInfo)

    def _nvlink_rates(self, d: NvmlDevice) -> tuple[float | None, float | None]:
        """Cumulative NVLink data counters (KiB) -> bytes/s from deltas between samples."""
        nv = self._nvml
        tx_id, rx_id = nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
        if d.nvlink_aggregate:
            # a bare field id leaves scopeId at 0 = link 0 only; ask for the sum explicitly
            values = self._call(d, "nvlink", nv.nvmlDeviceGetFieldValues, [(tx_id, NVLINK_ALL_LINKS), (rx_id, NVLINK_ALL_LINKS)])
            if values is None:
                return None, None
            if all(int(v.nvmlReturn) == nv.NVML_SUCCESS for v in values):
                return self._rates_from(d, libnvml.field_value(values[0]), libnvml.field_value(values[1]), values[0].timestamp)
            d.nvlink_aggregate = False
        ids = [(tx_id, p.link) for p in d.nvlinks] + [(rx_id, p.link) for p in d.nvlinks]
        values = self._call(d, "nvlink", nv.nvmlDeviceGetFieldValues, ids)
        if values is None:
            return None, None
        if not all(int(v.nvmlReturn) == nv.NVML_SUCCESS for v in values):
            d.unsupported.add("nvlink")
            self._unsupported_now["nvlink"].append(d)
            return None, None
        n = len(d.nvlinks)
        tx = sum(libnvml.field_value(v) for v in values[:n])
        rx = sum(libnvml.field_value(v) for v in values[n:])
        return self._rates_from(d, tx, rx, values[0].timestamp)

    def _rates_from(self, d: NvmlDevice, tx_kib: float, rx_kib: float, ts_us: int) -> tuple[float | None, float | None]:
        t = ts_us / 1e6 if ts_us and ts_us > 0 else time.time()  # NVML stamps field values in µs
        return d.nvlink_tx.update(tx_kib, t), d.nvlink_rx.update(rx_kib, t)

    def _processes(self, d: NvmlDevice) -> list[dict[str, Any]]:
        nv = self._nvml
        seen: dict[int, dict[str, Any]] = {}
        for field_name, fn in (
            ("processes", nv.nvmlDeviceGetComputeRunningProcesses),
            ("graphics_processes", nv.nvmlDeviceGetGraphicsRunningProcesses),
        ):
            for proc in self._call(d, field_name, fn) or []:
                pid = int(proc.pid)
                used = getattr(proc, "usedGpuMemory", None)
                if pid not in seen:
                    seen[pid] = {"pid": pid, "name": libnvml.process_name(nv, pid), "mem_used": int(used) if used is not None else None}
        return list(seen.values())
