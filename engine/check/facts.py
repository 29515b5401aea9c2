"""What `gpuscale-tui check` measured, as plain data: the input of the pure verdicts.

None is "not available" (NVML does not support the field on this GPU, no torch, no CUDA),
never 0. Bandwidths are GB/s with GB = 1e9 bytes, as nccl-tests counts them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.profiles import Hardware


@dataclass
class LoadSample:
    """One GPU while the check's short load ran on it (host-to-device copies, then matmuls)."""

    pcie_gen: int | None = None  # the highest seen during the load: links train up under load
    pcie_width: int | None = None
    throttle_reasons: int | None = None  # OR of every sample's clock-event bits
    temp_c_max: float | None = None
    power_w_max: float | None = None
    sm_clock_mhz_max: float | None = None


@dataclass
class GpuFacts:
    index: int
    uuid: str
    name: str | None = None
    bus_id: str | None = None
    mem_total: int | None = None  # bytes
    mem_used: int | None = None
    util_gpu: float | None = None  # percent, idle (before the check's own load)
    pcie_gen: int | None = None  # idle: may be trained down to save power
    pcie_width: int | None = None
    pcie_gen_max: int | None = None  # what GPU and slot together can do
    pcie_width_max: int | None = None
    pcie_gen_gpu_max: int | None = None  # what the GPU alone can do (an older slot shows here)
    power_limit_w: float | None = None  # enforced
    power_default_w: float | None = None
    throttle_reasons: int | None = None  # idle clock-event bits
    temp_c: float | None = None
    temp_slowdown_c: float | None = None
    ecc_enabled: bool | None = None
    ecc_uncorrected: int | None = None  # volatile: since the driver loaded
    retired_pending: bool | None = None  # pre-Ampere page retirement waiting for a reset
    remap_pending: bool | None = None  # Ampere+ row remapping waiting for a reset
    remap_failed: bool | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)  # other processes: {pid, name, mem_used}
    mig: bool | None = None
    nvlink_links_up: int = 0
    load: LoadSample | None = None  # None: no load could be run (no torch/CUDA)


@dataclass
class PairFacts:
    a: int  # GPU indexes
    b: int
    nvlink_count: int = 0
    p2p: bool | None = None  # NVML: direct reads or writes work
    p2p_status: str | None = None  # NVML's words when it is not "ok"
    common_ancestor: str | None = None
    d2d_gbps: float | None = None  # measured a -> b copy


@dataclass
class HostFacts:
    cpu_cores: int | None = None  # usable by this process: affinity and cgroup quota applied
    cpu_cores_online: int | None = None
    ram_bytes: int | None = None  # cgroup limit where lower than the machine's
    disk_free_bytes: int | None = None
    disk_path: str = ""
    mps_control: str | None = None  # nvidia-cuda-mps-control's path: the embedded server's MPS
    # who else keeps the usable cores busy (engine/cpu_share.py), over a short sample: shares of
    # those cores (1.0 = all of them), the busiest other processes ("name (pid) 98 %"), the
    # 1-minute load average and PSI memory pressure (avg10, %); None: not measured here
    others_cpu: float | None = None
    others_top: list[str] = field(default_factory=list)
    steal: float | None = None
    load_average: float | None = None
    memory_pressure: float | None = None


@dataclass
class ExpectedHardware(Hardware):
    """The profile's [hardware] block and the profile's name; gpu_count 0 means "whatever this
    machine has"."""

    profile: str = ""


@dataclass
class BoxFacts:
    host: HostFacts
    expected: ExpectedHardware
    gpus: list[GpuFacts] = field(default_factory=list)
    pairs: list[PairFacts] = field(default_factory=list)
    nvml_error: str | None = None  # why no GPU was read, when none was
    machine_gpus: int = 0  # GPUs NVML counts on the machine, visible or not
    cuda_visible: str | None = None  # CUDA_VISIBLE_DEVICES as set; None: unset (every GPU)
    visible_unknown: str | None = None  # its first entry that names no GPU here
    h2d_gbps: dict[int, float] = field(default_factory=dict)  # GPU index -> measured
    measure_error: str | None = None  # why the torch measurements did not run
    allreduce_busbw_gbps: float | None = None  # peak over the sizes
    allreduce_bytes: int | None = None  # the size where the peak was
    allreduce_error: str | None = None
    allreduce_skipped: str | None = None  # asked not to run, and why

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["h2d_gbps"] = {str(k): v for k, v in self.h2d_gbps.items()}  # JSON keys are strings
        return data
