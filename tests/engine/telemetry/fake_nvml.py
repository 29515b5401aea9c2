"""A stand-in for pynvml, for unit tests of the NVML reader's logic only (units, rates,
degradation, topology rules) on a machine without a GPU. It mirrors pynvml's call shapes and
raises pynvml's own NVMLError classes (constants and errors come through engine/libnvml.py, as
everything of NVML does); ``libnvml.stand_in(FakeNvml(...))`` puts it behind every NVML user.
The real library is exercised on the GPU box (tests/engine/telemetry/gpu_run.py) and its no-driver
path on this one (test_sampler.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from engine import libnvml

ALL_LINKS = 0xFFFFFFFF


@dataclass
class FakeLink:
    remote_pci: tuple[int, int, int]
    remote_type: int = libnvml.NVML_NVLINK_DEVICE_TYPE_GPU
    tx_kib: int = 0
    rx_kib: int = 0


@dataclass
class FakeGpu:
    index: int
    uuid: str
    name: str = "NVIDIA H200"
    pci: tuple[int, int, int] = (0, 0x18, 0)
    util_gpu: int = 50
    util_mem: int = 20
    mem_used: int = 10 << 30
    mem_total: int = 141 << 30
    power_mw: int = 350_000
    limit_mw: int = 700_000
    energy_mj: int = 123_456_789
    temp: int = 45
    sm_clock: int = 1980
    pcie_gen: int = 5
    pcie_width: int = 16
    pcie_gen_max: int = 5
    pcie_width_max: int = 16
    pcie_tx_kb: int = 1000
    pcie_rx_kb: int = 2000
    links: list[FakeLink] = field(default_factory=list)
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, used bytes)
    unsupported: set[str] = field(default_factory=set)  # pynvml function names
    lost: bool = False
    mig: bool = False
    clock_us: int = 1_700_000_000_000_000  # field-value timestamps, µs
    # read by the box check (engine/check)
    pcie_gen_gpu_max: int = 5
    default_limit_mw: int = 700_000
    throttle: int = 0  # nvmlClocksEventReason* bits
    slowdown_c: int = 90
    ecc: bool = True
    ecc_uncorrected: int = 0
    retired_pending: bool = False
    remap: tuple[int, int, int, int] = (0, 0, 0, 0)  # corrected, uncorrected, pending, failed

    @property
    def bus_id(self) -> str:
        d, b, dev = self.pci
        return f"{d:08X}:{b:02X}:{dev:02X}.0"


def _error(code: int) -> libnvml.NVMLError:
    return libnvml.NVMLError(code)


class FakeNvml:
    def __init__(
        self,
        gpus: list[FakeGpu],
        *,
        p2p: dict[tuple[int, int, int], int] | None = None,  # (a, b, cap index) -> status
        p2p_default: int = libnvml.NVML_P2P_STATUS_OK,
        ancestor: int = libnvml.NVML_TOPOLOGY_SYSTEM,
        aggregate_scope: bool = True,
        init_error: int | None = None,
    ) -> None:
        self.gpus = gpus
        self.p2p = p2p or {}
        self.p2p_default = p2p_default
        self.ancestor = ancestor
        self.aggregate_scope = aggregate_scope
        self.init_error = init_error
        self.calls: list[str] = []
        self.shutdown_called = False

    def __getattr__(self, name: str) -> Any:
        # constants and error classes come from the real binding; functions never do
        if name.startswith(("NVML_", "NVMLError", "nvmlMemory_v")):
            return getattr(libnvml, name)
        raise AttributeError(name)

    def _check(self, gpu: FakeGpu, fn: str) -> None:
        self.calls.append(fn)
        if gpu.lost:
            raise _error(libnvml.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.unsupported:
            raise _error(libnvml.NVML_ERROR_NOT_SUPPORTED)

    # -- lifecycle
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise _error(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdown_called = True

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.00"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 12080

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        return self.gpus[i]

    # -- identity
    def nvmlDeviceGetUUID(self, g: FakeGpu) -> str:
        self._check(g, "nvmlDeviceGetUUID")
        return g.uuid

    def nvmlDeviceGetName(self, g: FakeGpu) -> str:
        self._check(g, "nvmlDeviceGetName")
        return g.name

    def nvmlDeviceGetPciInfo(self, g: FakeGpu) -> Any:
        self._check(g, "nvmlDeviceGetPciInfo")
        d, b, dev = g.pci
        return SimpleNamespace(busId=g.bus_id.encode(), domain=d, bus=b, device=dev)

    def nvmlDeviceGetMigMode(self, g: FakeGpu) -> list[int]:
        self._check(g, "nvmlDeviceGetMigMode")
        return [int(g.mig), int(g.mig)]

    # -- samples
    def nvmlDeviceGetUtilizationRates(self, g: FakeGpu) -> Any:
        self._check(g, "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=g.util_gpu, memory=g.util_mem)

    def nvmlDeviceGetMemoryInfo(self, g: FakeGpu, version: int | None = None) -> Any:
        self._check(g, "nvmlDeviceGetMemoryInfo" if version is None else "nvmlDeviceGetMemoryInfo_v2")
        return SimpleNamespace(used=g.mem_used, total=g.mem_total, free=g.mem_total - g.mem_used)

    def nvmlDeviceGetPowerUsage(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetPowerUsage")
        return g.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetEnforcedPowerLimit")
        return g.limit_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetTotalEnergyConsumption")
        return g.energy_mj

    def nvmlDeviceGetTemperature(self, g: FakeGpu, sensor: int) -> int:
        self._check(g, "nvmlDeviceGetTemperature")
        assert sensor == libnvml.NVML_TEMPERATURE_GPU
        return g.temp

    def nvmlDeviceGetClockInfo(self, g: FakeGpu, kind: int) -> int:
        self._check(g, "nvmlDeviceGetClockInfo")
        assert kind == libnvml.NVML_CLOCK_SM
        return g.sm_clock

    def nvmlDeviceGetCurrPcieLinkGeneration(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetCurrPcieLinkGeneration")
        return g.pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetCurrPcieLinkWidth")
        return g.pcie_width

    def nvmlDeviceGetMaxPcieLinkGeneration(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetMaxPcieLinkGeneration")
        return g.pcie_gen_max

    def nvmlDeviceGetMaxPcieLinkWidth(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetMaxPcieLinkWidth")
        return g.pcie_width_max

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetGpuMaxPcieLinkGeneration")
        return g.pcie_gen_gpu_max

    def nvmlDeviceGetPowerManagementDefaultLimit(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetPowerManagementDefaultLimit")
        return g.default_limit_mw

    def nvmlDeviceGetCurrentClocksEventReasons(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetCurrentClocksEventReasons")
        return g.throttle

    def nvmlDeviceGetTemperatureThreshold(self, g: FakeGpu, kind: int) -> int:
        self._check(g, "nvmlDeviceGetTemperatureThreshold")
        assert kind == libnvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
        return g.slowdown_c

    def nvmlDeviceGetEccMode(self, g: FakeGpu) -> list[int]:
        self._check(g, "nvmlDeviceGetEccMode")
        return [int(g.ecc), int(g.ecc)]

    def nvmlDeviceGetTotalEccErrors(self, g: FakeGpu, error_type: int, counter_type: int) -> int:
        self._check(g, "nvmlDeviceGetTotalEccErrors")
        assert (error_type, counter_type) == (libnvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, libnvml.NVML_VOLATILE_ECC)
        return g.ecc_uncorrected

    def nvmlDeviceGetRetiredPagesPendingStatus(self, g: FakeGpu) -> int:
        self._check(g, "nvmlDeviceGetRetiredPagesPendingStatus")
        return int(g.retired_pending)

    def nvmlDeviceGetRemappedRows(self, g: FakeGpu) -> tuple[int, int, int, int]:
        self._check(g, "nvmlDeviceGetRemappedRows")
        return g.remap

    def nvmlDeviceGetPcieThroughput(self, g: FakeGpu, counter: int) -> int:
        self._check(g, "nvmlDeviceGetPcieThroughput")
        return g.pcie_tx_kb if counter == libnvml.NVML_PCIE_UTIL_TX_BYTES else g.pcie_rx_kb

    def nvmlDeviceGetComputeRunningProcesses(self, g: FakeGpu) -> list[Any]:
        self._check(g, "nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in g.processes]

    def nvmlDeviceGetGraphicsRunningProcesses(self, g: FakeGpu) -> list[Any]:
        self._check(g, "nvmlDeviceGetGraphicsRunningProcesses")
        return []

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        return f"proc{pid}"

    # -- NVLink
    def nvmlDeviceGetNvLinkState(self, g: FakeGpu, link: int) -> int:
        self._check(g, "nvmlDeviceGetNvLinkState")
        if not g.links:
            raise _error(libnvml.NVML_ERROR_NOT_SUPPORTED)
        if link >= len(g.links):
            raise _error(libnvml.NVML_ERROR_INVALID_ARGUMENT)
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, g: FakeGpu, link: int) -> Any:
        d, b, dev = g.links[link].remote_pci
        return SimpleNamespace(domain=d, bus=b, device=dev, busId=f"{d:08X}:{b:02X}:{dev:02X}.0".encode())

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, g: FakeGpu, link: int) -> int:
        return g.links[link].remote_type

    def nvmlDeviceGetFieldValues(self, g: FakeGpu, ids: list[Any]) -> Any:
        self._check(g, "nvmlDeviceGetFieldValues")
        values = (libnvml.c_nvmlFieldValue_t * len(ids))()
        for i, spec in enumerate(ids):
            field_id, scope = spec if isinstance(spec, tuple) else (spec, 0)  # pynvml: bare int -> scope 0
            v = values[i]
            v.fieldId, v.scopeId, v.timestamp = field_id, scope, g.clock_us
            v.valueType = libnvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            attr = {libnvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: "tx_kib", libnvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: "rx_kib"}.get(field_id)
            if attr is None:
                v.nvmlReturn = libnvml.NVML_ERROR_NOT_SUPPORTED
            elif scope == ALL_LINKS:
                if self.aggregate_scope:
                    v.nvmlReturn = libnvml.NVML_SUCCESS
                    v.value.ullVal = sum(getattr(link, attr) for link in g.links)
                else:
                    v.nvmlReturn = libnvml.NVML_ERROR_INVALID_ARGUMENT
            elif scope < len(g.links):
                v.nvmlReturn = libnvml.NVML_SUCCESS
                v.value.ullVal = getattr(g.links[scope], attr)
            else:
                v.nvmlReturn = libnvml.NVML_ERROR_INVALID_ARGUMENT
        return values

    # -- topology
    def nvmlDeviceGetP2PStatus(self, a: FakeGpu, b: FakeGpu, cap: int) -> int:
        if type(cap) is not int:  # as ctypes does for the real call (seen: a tuple constant)
            raise TypeError(f"argument 3: Don't know how to convert parameter 3 ({cap!r})")
        return self.p2p.get((a.index, b.index, cap), self.p2p_default)

    def nvmlDeviceGetTopologyCommonAncestor(self, a: FakeGpu, b: FakeGpu) -> int:
        return self.ancestor
