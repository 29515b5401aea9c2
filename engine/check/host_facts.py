"""The host's side of the check: the cores and memory this process may really use (a container's
CPU quota and memory limit count, not the machine's totals) and free disk for recordings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from engine.check.facts import HostFacts
from engine.cpu_share import busiest_others, load_average, memory_pressure, read_cpu, share_between
from engine.hostinfo import CGROUP, cgroup_cpu_limit, process_cores, read_setting, usable_cores
from engine.server.mps import find_control

CONTENTION_SAMPLE_S = 1.0  # how long others' CPU use is watched

__all__ = ["cgroup_cpu_limit", "cgroup_memory_limit", "free_disk", "read_host_facts", "usable_cores"]


def cgroup_memory_limit(root: Path = CGROUP) -> int | None:
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        text = read_setting(path)
        if text and text != "max" and text.isdigit():
            value = int(text)
            if value < 1 << 60:  # v1 says "no limit" with a huge number
                return value
    return None


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
    ram = int(psutil.virtual_memory().total)
    limit = cgroup_memory_limit()
    free, where = free_disk(record_dir)
    before = read_cpu()
    top = busiest_others(CONTENTION_SAMPLE_S)  # blocks for the sample: the same interval as the share
    share = share_between(before, read_cpu())
    return HostFacts(
        others_cpu=share.others if share else None,
        others_top=[f"{o.name} ({o.pid}) {o.cpu_percent:.0f} %" for o in top],
        steal=share.steal if share else None,
        load_average=load_average(),
        memory_pressure=memory_pressure(),
        cpu_cores=process_cores(),
        cpu_cores_online=online,
        ram_bytes=min(ram, limit) if limit else ram,
        disk_free_bytes=free,
        disk_path=where,
        mps_control=find_control(),
    )
