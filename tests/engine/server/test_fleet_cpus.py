"""CPU servers side by side (cpu*N) each run on their own share of the cores, as N boxes would:
unpinned, two servers' compute threads took each other's cores and one read 10x the other."""

from __future__ import annotations

import os

import psutil
import pytest

from engine.server.fleet import ServerFleet, split_cpus


@pytest.mark.parametrize("cpus, servers, shares", [
    ([0, 1], 2, [(0,), (1,)]),
    ([0, 1, 2, 3, 4], 2, [(0, 1, 2), (3, 4)]),
    ([4, 2, 6, 8], 4, [(2,), (4,), (6,), (8,)]),
    ([0], 3, [(0,), (0,), (0,)]),  # fewer cores than servers: they share, in turn
    ([], 2, [(), ()]),
])
def test_split_cpus(cpus, servers, shares):
    assert split_cpus(cpus, servers) == shares


def test_a_gpu_fleet_is_not_pinned_to_cpus():
    fleet = ServerFleet("1x*2", model="identity", gpu_count=2)
    assert [s.cpus for s in fleet.servers] == [(), ()]


def test_a_callers_cpus_are_split_between_cpu_servers():
    fleet = ServerFleet("cpu*2", model="identity", cpus=(0, 1))
    assert [s.cpus for s in fleet.servers] == [(0,), (1,)]


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one usable CPU: the servers share it")
def test_each_cpu_server_and_its_stubs_run_on_their_own_cores(tmp_path):
    with ServerFleet("cpu*2", model="identity", log_dir=tmp_path) as fleet:
        seen = []
        for server in fleet.servers:
            guard = psutil.Process(server.pid)
            family = guard.children(recursive=True)
            assert any("tritonserver" in p.name() for p in family)
            assert any("triton_python_backend_stub" in " ".join(p.cmdline()) for p in family)
            allowed = {tuple(sorted(p.cpu_affinity())) for p in family}
            assert allowed == {server.cpus}, (server.cpus, allowed)
            seen.append(set(server.cpus))
        assert seen[0].isdisjoint(seen[1]) and seen[0] | seen[1] == set(os.sched_getaffinity(0))
