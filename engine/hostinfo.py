"""Facts about this machine and the software on it, recorded with every session, and the cores
this process may use (the check and the load engine count them alike)."""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import socket
import sys
from pathlib import Path

from engine import libnvml

CGROUP = Path("/sys/fs/cgroup")


def read_setting(path: Path) -> str | None:
    """A kernel setting file's text, stripped; None when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return None


def cgroup_cpu_limit(root: Path = CGROUP) -> float | None:
    """CPUs allowed by the cgroup quota (v2 cpu.max, v1 cfs quota/period); None: no quota."""
    text = read_setting(root / "cpu.max")
    if text:
        quota, _, period = text.partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    quota_us, period_us = read_setting(root / "cpu" / "cpu.cfs_quota_us"), read_setting(root / "cpu" / "cpu.cfs_period_us")
    if quota_us and period_us and int(quota_us) > 0:
        return int(quota_us) / int(period_us)
    return None


def usable_cores(online: int | None, affinity: int | None, quota: float | None) -> int | None:
    """The least of the online cores, this process's affinity and the quota (rounded up:
    a 7.5-CPU quota still runs 8 threads, part of the time)."""
    limits = [x for x in (online, affinity, math.ceil(quota) if quota else None) if x]
    return min(limits) if limits else None


def process_cores() -> int:
    """The cores this process may use now: the least of the online cores, its affinity mask
    (taskset, a container's cpuset) and the cgroup quota; os.cpu_count() alone counts the host's."""
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS: no affinity masks
        affinity = None
    return usable_cores(os.cpu_count(), affinity, cgroup_cpu_limit()) or 1


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    if sys.platform != "linux":  # no /proc/cpuinfo
        return platform.processor() or None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host_facts() -> dict[str, object]:
    import psutil

    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "ram_bytes": psutil.virtual_memory().total,
        "python": sys.version.split()[0],
    }


def software_versions() -> dict[str, str | None]:
    return {
        "gpuscale_tui": _version("gpuscale-tui"),
        "python": sys.version.split()[0],
        "torch": _version("torch"),
        "numpy": _version("numpy"),
        "nvidia_pytriton": _version("nvidia-pytriton"),
        **libnvml.driver_versions(),
    }
