"""The host's side of the check: the cores and memory this process may really use (a container's
CPU quota and memory limit count, not the machine's totals) and free disk for recordings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from engine.check.facts import HostFacts
from engine.hostinfo import CGROUP, cgroup_cpu_limit, process_cores, read_setting, usable_cores
from engine.server.mps import find_control

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
    return HostFacts(
        cpu_cores=process_cores(),
        cpu_cores_online=online,
        ram_bytes=min(ram, limit) if limit else ram,
        disk_free_bytes=free,
        disk_path=where,
        mps_control=find_control(),
    )
