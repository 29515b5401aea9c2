"""The embedded server's own leftovers: after a SIGKILL of tritonserver, its guard removes the
Python backend's /dev/shm regions of that server (and of no other)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from engine.server.embedded import EmbeddedServer

pytestmark = pytest.mark.server
SHM = Path("/dev/shm")


def _mapped_regions(procs: list[psutil.Process]) -> set[str]:
    """The Python-backend regions the server and its stubs have mapped: theirs, whatever their names."""
    found: set[str] = set()
    for proc in procs:
        try:
            for m in proc.memory_maps(grouped=True):
                if m.path.startswith("/dev/shm/triton_python_backend_shm_region_"):
                    found.add(Path(m.path).name)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def test_sigkill_of_tritonserver_leaves_none_of_its_shared_memory(tmp_path):
    other = SHM / f"triton_python_backend_shm_region_not-ours-test-{os.getpid()}"  # another server's: must stay
    other.write_bytes(b"x")
    srv = EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path).start()
    try:
        guard = psutil.Process(srv._guard.pid)
        family = guard.children(recursive=True)
        regions = _mapped_regions(family)
        assert regions, "the server mapped no Python-backend region: nothing to check"
        (triton,) = [p for p in family if p.name() == "tritonserver"]
        os.kill(triton.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while srv._guard.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert srv._guard.poll() is not None, "the guard did not end after its server died"
        left = {name for name in regions if (SHM / name).exists()}
        assert not left, f"left in /dev/shm after tritonserver's SIGKILL: {sorted(left)}"
        assert other.exists(), "the guard removed a region that was not its server's"
    finally:
        srv.stop()
        other.unlink(missing_ok=True)


def test_a_stop_that_kills_the_guard_too_leaves_none_of_its_shared_memory(tmp_path):
    """A stop with a short timeout SIGKILLs the guard with its group: the tool removes the regions."""
    srv = EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path).start()
    regions = _mapped_regions(psutil.Process(srv._guard.pid).children(recursive=True))
    assert regions, "the server mapped no Python-backend region: nothing to check"
    srv.stop(timeout=0.01)
    left = {name for name in regions if (SHM / name).exists()}
    assert not left, f"left in /dev/shm after a killing stop: {sorted(left)}"
