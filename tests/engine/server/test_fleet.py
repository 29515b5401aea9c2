"""Several embedded servers side by side (cpu*2 here; 1x*N on GPUs) against the real tritonserver:
their own ports and shared-memory regions, all stopped with nothing left, and a server that does
not start named."""

import glob
import tempfile
import time

import numpy as np
import psutil
import pytest

from engine.server.embedded import ServerStartError
from engine.server.fleet import ServerFleet
from tests.engine.server.test_server import _infer_identity, _wait_gone

pytestmark = [pytest.mark.server, pytest.mark.slow]


def _regions(prefix: str) -> list[str]:
    return glob.glob(f"/dev/shm/{prefix}*")


def _pids(fleet: ServerFleet) -> set[int]:
    out = set()
    for server in fleet.servers:
        guard = psutil.Process(server.pid)
        out |= {guard.pid, *(p.pid for p in guard.children(recursive=True))}
    return out


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The servers' scratch folders go here (not the shared /tmp), to see that none is left."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_two_cpu_servers_have_their_own_ports_and_regions_and_stop_clean(tmp_path, scratch):
    fleet = ServerFleet("cpu*2", model="identity", log_dir=tmp_path)
    assert [s.pinned_gpu for s in fleet.servers] == [None, None] and not fleet.shared
    started = time.monotonic()
    with fleet:
        took = time.monotonic() - started
        a, b = fleet.servers
        assert a.alive() and b.alive() and fleet.alive()
        assert {a.http_port, a.grpc_port, a.metrics_port}.isdisjoint({b.http_port, b.grpc_port, b.metrics_port})
        assert len({a.http_port, a.grpc_port, a.metrics_port}) == 3
        assert a.shm_region_prefix != b.shm_region_prefix
        assert _regions(a.shm_region_prefix) and _regions(b.shm_region_prefix)  # each its own stub's regions
        assert fleet.http_urls == [a.http_url, b.http_url] and fleet.variant == "cpu*2"
        for url in fleet.http_urls:
            np.testing.assert_array_equal(_infer_identity(url), np.arange(32, dtype=np.float32).reshape(2, 16))
        pids = _pids(fleet)
        assert len(list(scratch.iterdir())) == 2
    assert not _wait_gone(pids), "a tritonserver or a stub outlived stop()"
    assert not _regions(a.shm_region_prefix) and not _regions(b.shm_region_prefix)
    assert not fleet.left_behind
    assert not list(scratch.iterdir())
    assert (tmp_path / "server1" / "tritonserver.log").stat().st_size > 0
    assert (tmp_path / "server2" / "tritonserver.log").stat().st_size > 0
    print(f"2 servers started in {took:.1f} s")  # in parallel: about one server's start


def test_a_server_that_does_not_start_is_named_and_the_other_stopped(tmp_path, scratch):
    fleet = ServerFleet("cpu*2", model="identity", log_dir=tmp_path)
    fleet.servers[1].startup_timeout_s = 0.01  # it cannot be ready in time: a real start failure
    with pytest.raises(ServerStartError) as info:
        fleet.start()
    first_line = str(info.value).splitlines()[0]
    assert first_line.startswith("server 2 of 2 of variant cpu*2 did not start: tritonserver not ready after 0 s")
    assert not fleet.servers[0].alive() and not fleet.servers[1].alive()
    for server in fleet.servers:
        assert not _regions(server.shm_region_prefix)
    assert not list(scratch.iterdir())  # their scratch folders are gone
    fleet.stop()  # idempotent


def test_a_server_that_dies_is_named_with_its_log(tmp_path, scratch):
    import os
    import signal

    with ServerFleet("cpu*2", model="identity", log_dir=tmp_path) as fleet:
        second = fleet.servers[1]
        triton = next(p for p in psutil.Process(second.pid).children() if p.name() == "tritonserver")
        os.kill(triton.pid, signal.SIGKILL)
        deadline = time.monotonic() + 120  # a bound on a hang: the loop ends when it is gone
        while second.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not fleet.alive() and fleet.servers[0].alive()
        assert fleet.exit_reason().startswith(f"server 2 of 2, {second.http_url}: tritonserver killed by SIGKILL")
        assert fleet.log_path == second.log_path == tmp_path / "server2" / "tritonserver.log"
    assert not list(scratch.iterdir()) and not _regions(second.shm_region_prefix)
