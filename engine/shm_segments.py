"""Names of the POSIX shared-memory segments this tool creates (load.transport = system_shm).

A leaf both sides need: engine/triton/shm.py creates ``/dev/shm/gpuscale-<pid>-...`` segments, and
the embedded server's guard (engine/server) removes those of a tool killed before it could.
Standard library only: the guard imports it.
"""

from __future__ import annotations

import os
import re


def segment_prefix(pid: int | None = None) -> str:
    """Every /dev/shm segment process ``pid`` (default: this one) creates starts with this."""
    return f"gpuscale-{os.getpid() if pid is None else pid}-"


PYTHON_BACKEND_REGION = "triton_python_backend_shm_region_"  # the Python backend's default prefix


def server_region_prefix(pid: int | None = None) -> str:
    """A prefix for one embedded server's Python-backend regions (``--backend-config=python,
    shm-region-prefix-name=``): unique per server, so that its guard removes its regions and no
    other server's. It keeps the backend's default prefix at the front (one glob finds them all)."""
    return f"{PYTHON_BACKEND_REGION}gpuscale-{os.getpid() if pid is None else pid}-{os.urandom(4).hex()}_"


# whose they are: the pid of the tool that created them (its client segments, its servers' regions)
_OWNER = re.compile(rf"^(?:{PYTHON_BACKEND_REGION})?gpuscale-(\d+)-")


def owner_pid(name: str) -> int | None:
    """The pid of the tool that created a segment or region of ours (from its name), or None."""
    owner = _OWNER.match(name)
    return int(owner.group(1)) if owner else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process: alive
        return True
    return True


def owner_alive(name: str) -> bool:
    """Whether the tool that created a segment or region of ours (named in it) still runs."""
    pid = owner_pid(name)
    return pid is not None and _alive(pid)


def remove_stale_segments(root: str = "/dev/shm") -> list[str]:
    """Remove this user's segments and Python-backend regions whose tool is gone (its pid is not a
    live process): what a tool and its server's guard both killed with SIGKILL leave behind, 32 MiB
    a region, until /dev/shm is full. A reused pid keeps them (never removes a live one's)."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in names:
        owner = owner_pid(name)
        if owner is None or _alive(owner):
            continue
        path = os.path.join(root, name)
        try:
            if os.stat(path).st_uid == os.getuid():
                os.unlink(path)
                removed.append(name)
        except OSError:
            pass
    return removed


def remove_segments(prefix: str, root: str = "/dev/shm") -> int:
    """Remove the segments whose names start with ``prefix``; returns how many were removed."""
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    removed = 0
    for name in names:
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join(root, name))
                removed += 1
            except OSError:
                pass
    return removed
