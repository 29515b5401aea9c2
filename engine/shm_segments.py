"""Names of the POSIX shared-memory segments this tool creates (load.transport = system_shm).

A leaf both sides need: engine/load/shm.py creates ``/dev/shm/gpuscale-<pid>-...`` segments, and
the embedded server's guard (engine/server) removes those of a tool killed before it could.
"""

from __future__ import annotations

import os


def segment_prefix(pid: int | None = None) -> str:
    """Every /dev/shm segment process ``pid`` (default: this one) creates starts with this."""
    return f"gpuscale-{os.getpid() if pid is None else pid}-"
