"""The host's side of the check: the cores and memory this process may really use (a container's
CPU quota and memory limit count, not the machine's totals) and free disk for recordings."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

from engine.check.facts import HostFacts
from engine.server.mps import find_control

CGROUP = Path("/sys/fs/cgroup")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return None


def cgroup_cpu_limit(root: Path = CGROUP) -> float | None:
    """CPUs allowed by the cgroup quota (v2 cpu.max, v1 cfs quota/period); None: no quota."""
    text = _read(root / "cpu.max")
    if text:
        quota, _, period = text.partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    quota_us, period_us = _read(root / "cpu" / "cpu.cfs_quota_us"), _read(root / "cpu" / "cpu.cfs_period_us")
    if quota_us and period_us and int(quota_us) > 0:
        return int(quota_us) / int(period_us)
    return None


def cgroup_memory_limit(root: Path = CGROUP) -> int | None:
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        text = _read(path)
        if text and text != "max" and text.isdigit():
            value = int(text)
            if value < 1 << 60:  # v1 says "no limit" with a huge number
                return value
    return None


def usable_cores(online: int | None, affinity: int | None, quota: float | None) -> int | None:
    """The least of the online cores, this process's affinity and the quota (rounded up:
    a 7.5-CPU quota still runs 8 threads, part of the time)."""
    limits = [x for x in (online, affinity, math.ceil(quota) if quota else None) if x]
    return min(limits) if limits else None


def free_disk(path: Path) -> tuple[int | None, str]:
    """Free bytes where recordings go: the folder, or its nearest existing parent."""
    probe = path.resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free, str(path)
    except OSError:
        return None, str(path)


def read_host_facts(record_dir: Path) -> HostFacts:
    import psutil

    online = os.cpu_count()
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    ram = int(psutil.virtual_memory().total)
    limit = cgroup_memory_limit()
    free, where = free_disk(record_dir)
    return HostFacts(
        cpu_cores=usable_cores(online, affinity, cgroup_cpu_limit()),
        cpu_cores_online=online,
        ram_bytes=min(ram, limit) if limit else ram,
        disk_free_bytes=free,
        disk_path=where,
        mps_control=find_control(),
    )
