"""Who keeps this machine's CPUs busy (Linux /proc): the share of the cores this process may use
that other processes took between two readings (neither ours nor the server's), the share the
hypervisor stole, the busiest other processes, the load average and memory pressure (PSI).

"Ours" is this process and its descendants (load workers, an embedded server and its stubs),
plus any process tree named as a root (a local server the tool did not start). Elsewhere than
Linux every reading is None: nothing is claimed that was not measured."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# /proc/stat's cpuN columns: user nice system idle iowait irq softirq steal guest guest_nice
_IDLE_COLUMNS = (3, 4)  # idle, iowait
_STEAL_COLUMN = 7


@dataclass(frozen=True)
class CpuReading:
    at: float  # time.monotonic()
    busy_s: float  # CPU seconds the cores we may use spent busy (not idle, iowait or steal)
    steal_s: float  # CPU seconds the hypervisor took from those cores
    cores: int  # the cores read (this process's affinity)
    ours: dict[tuple[int, int], float]  # (pid, start time) -> CPU seconds of our processes


@dataclass(frozen=True)
class CpuShare:
    """Between two readings, as fractions of the cores read over the interval (1.0 = all of them)."""

    others: float  # taken by processes that are neither ours nor the server's
    steal: float
    ours: float
    seconds: float


def _cpu_set() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _proc_stat_cores(cpus: set[int] | None) -> tuple[float, float, int] | None:
    """(busy seconds, steal seconds, cores) summed over ``cpus`` (all when None)."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    busy = steal = 0.0
    cores = 0
    for line in lines:
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *cols = line.split()
        if cpus is not None and int(name[3:]) not in cpus:
            continue
        values = [int(c) for c in cols]
        idle = sum(values[i] for i in _IDLE_COLUMNS if i < len(values))
        stolen = values[_STEAL_COLUMN] if len(values) > _STEAL_COLUMN else 0
        # guest time is counted inside user already (columns 8 and 9): not added again
        busy += sum(values[:8]) - idle - stolen
        steal += stolen
        cores += 1
    if not cores:
        return None
    return busy / CLOCK_TICKS, steal / CLOCK_TICKS, cores


def _tree_cpu(roots: list[int]) -> dict[tuple[int, int], float]:
    """CPU seconds (user + system) of each process in the trees under ``roots``."""
    import psutil

    out: dict[tuple[int, int], float] = {}
    for root in roots:
        try:
            top = psutil.Process(root)
            procs = [top, *top.children(recursive=True)]
        except psutil.Error:
            continue
        for p in procs:
            try:
                t = p.cpu_times()
                out[(p.pid, int(p.create_time() * 100))] = t.user + t.system
            except psutil.Error:
                continue
    return out


def process_cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) one process has spent; None when it cannot be read."""
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return t.user + t.system


def read_cpu(extra_roots: list[int] | None = None) -> CpuReading | None:
    """A reading now; None where /proc/stat cannot be read (not Linux)."""
    if sys.platform != "linux":
        return None
    cores = _proc_stat_cores(_cpu_set())
    if cores is None:
        return None
    return CpuReading(time.monotonic(), cores[0], cores[1], cores[2], _tree_cpu([os.getpid(), *(extra_roots or [])]))


def share_between(a: CpuReading | None, b: CpuReading | None) -> CpuShare | None:
    """What others, the hypervisor and we took between two readings; None when either is missing
    or no time passed. A process of ours that ended in between loses its last CPU time from
    ``ours``: others can read a little high. They read low only by the ticks /proc/stat lost (a VM
    whose host takes the vCPU without reporting steal: 3-7 % of the cores on a 2-core VM)."""
    if a is None or b is None or b.at <= a.at:
        return None
    capacity = (b.at - a.at) * b.cores
    ours = sum(max(0.0, used - a.ours.get(key, 0.0)) for key, used in b.ours.items())
    busy = max(0.0, b.busy_s - a.busy_s)
    return CpuShare(others=min(1.0, max(0.0, busy - ours) / capacity),
                    steal=min(1.0, max(0.0, b.steal_s - a.steal_s) / capacity),
                    ours=min(1.0, ours / capacity), seconds=b.at - a.at)


@dataclass(frozen=True)
class OtherProcess:
    pid: int
    name: str
    cpu_percent: float  # of one core


def busiest_others(interval_s: float = 0.5, top: int = 10, extra_roots: list[int] | None = None) -> list[OtherProcess]:
    """The processes, neither ours nor under ``extra_roots``, that used the most CPU over
    ``interval_s`` (blocking), busiest first; those under 1 % of one core are left out."""
    import psutil

    if sys.platform != "linux":
        return []
    ours = {pid for pid, _ in _tree_cpu([os.getpid(), *(extra_roots or [])])}
    procs = []
    for p in psutil.process_iter(["name"]):
        if p.pid in ours:
            continue
        try:
            p.cpu_percent(None)
            procs.append(p)
        except psutil.Error:
            continue
    time.sleep(interval_s)
    found = []
    for p in procs:
        try:
            used = p.cpu_percent(None)
        except psutil.Error:
            continue
        if used >= 1.0:
            found.append(OtherProcess(p.pid, p.info.get("name") or "?", used))
    return sorted(found, key=lambda o: -o.cpu_percent)[:top]


def load_average() -> float | None:
    """The 1-minute load average (runnable and waiting tasks, machine-wide)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def memory_pressure() -> float | None:
    """PSI: the share of the last 10 s in which some task waited for memory (0-100); None where
    the kernel has no PSI."""
    if sys.platform != "linux":
        return None
    try:
        with open("/proc/pressure/memory") as f:
            for line in f:
                if line.startswith("some"):
                    fields = dict(part.split("=") for part in line.split()[1:])
                    return float(fields["avg10"])
    except (OSError, ValueError, KeyError):
        return None
    return None
