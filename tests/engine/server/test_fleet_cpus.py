"""CPU servers side by side (cpu*N) each compute with their share of the cores' threads, as N boxes
would: with as many threads as the box has cores, two servers' compute threads took each other's
cores and one read 10x the other. They are not pinned to their share: a pinned server gets only
what its cores' other tenants leave it, and two equal ones read up to 3.3x apart."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from engine.analysis.stability import spread
from engine.events import LevelResult, WindowResult
from engine.record.reader import Recording
from engine.server.fleet import ServerFleet, split_cpus

ROOT = Path(__file__).resolve().parents[3]
# ratio - 1 allowed however well the level's windows agree. On 2 cores two equal unpinned servers,
# the load's client and anything else runnable are more threads than cores, and the kernel's
# placement gives the servers steadily unequal shares: 1.40x at a 6 % windows' spread
# (docs/results/scale_out_cpu_pinning.md), 1.52x at 3 % beside two hogs with the level not contended
# (a fresh-clone suite run, 2026-11-27), 2.37x at 6 % in CI (2026-11-29). The fault this guards
# against read 10x; pinning and thread counts are held exactly by the stubs' test below.
FLOOR = 3.0


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


def test_cpu_servers_compute_with_their_share_of_the_cores_and_are_not_pinned_to_it():
    fleet = ServerFleet("cpu*2", model="identity", cpus=(0, 1, 2))
    assert [s.cpus for s in fleet.servers] == [(0, 1, 2), (0, 1, 2)]  # a caller's cpus hold the fleet
    assert [s.compute_threads for s in fleet.servers] == [2, 1]
    assert [s.compute_threads for s in ServerFleet("1x*2", model="identity", gpu_count=2).servers] == [None, None]


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one usable CPU: the servers share it")
def test_each_cpu_servers_stubs_get_its_share_of_threads_and_every_core(tmp_path):
    usable = tuple(sorted(os.sched_getaffinity(0)))
    with ServerFleet("cpu*2", model="identity", log_dir=tmp_path) as fleet:
        for server, share in zip(fleet.servers, split_cpus(list(usable), 2), strict=True):
            family = psutil.Process(server.pid).children(recursive=True)
            stubs = [p for p in family if "triton_python_backend_stub" in " ".join(p.cmdline())]
            assert stubs and any("tritonserver" in p.name() for p in family)
            for stub in stubs:
                assert stub.environ().get("GPUSCALE_COMPUTE_THREADS") == str(len(share))
            assert {tuple(sorted(p.cpu_affinity())) for p in family} == {usable}


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.xdist_group("cpu_study")  # a CPU sweep: tests/conftest.py
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one usable CPU: the servers share it")
def test_two_equal_cpu_servers_measure_equal_within_the_spread(tmp_path):
    """A cpu*2 sweep: both servers get half the connections, so each must serve about half the
    requests. How far apart they may be follows from the level's own windows: the spread of its
    measured windows' throughput (max/min - 1), times sqrt(2) for a half's share of the noise and
    2 for the ratio of two halves; at least FLOOR. The box-noise rule is on, as for a user: beside
    two CPU hogs one run read 878 against 395 req/s with the rule off, so a level that others'
    load shaped must say so (contended, deciding nothing), and only a sound level is held to
    equality. Up to 3 runs, for a sound level; a box busy through all of them skips, said."""
    contended = []
    for attempt in range(3):
        level, windows = _cpu2_level(tmp_path / f"rec{attempt}")
        assert not level.degraded and [ep.connections for ep in level.endpoints] == [4, 4]
        ep1, ep2 = (ep.throughput_rps for ep in level.endpoints)
        assert ep1 > 0 and ep2 > 0, level.endpoints
        if level.status == "contended":  # said, with what others took: it decides nothing
            assert level.others_cpu is not None or level.steal is not None, level
            contended.append(f"others {level.others_cpu or 0:.0%} steal {level.steal or 0:.0%}: "
                             f"{ep1:.0f} and {ep2:.0f} req/s")
            continue
        window_spread = spread(windows)
        assert window_spread is not None, windows
        tolerance = max(2 * math.sqrt(2) * window_spread, FLOOR)
        ratio = max(ep1, ep2) / min(ep1, ep2)
        print(f"ep1 {ep1:.1f} ep2 {ep2:.1f} req/s: ratio {ratio:.2f}, windows' spread {window_spread:.1%}, "
              f"tolerance {tolerance:.0%}, {level.status}")
        assert ratio - 1 <= tolerance, (f"a {level.status} level: ep1 {ep1:.1f} and ep2 {ep2:.1f} req/s differ by "
                                        f"{ratio - 1:.0%}, more than {tolerance:.0%} (windows: {windows})")
        return
    pytest.skip("other processes shaped every run (" + "; ".join(contended) + ")")


def _cpu2_level(out: Path) -> tuple[LevelResult, list[float]]:
    sets = ["model.name=identity", "model.variant=cpu*2", "load.concurrency=8", "load.window_ms=500",
            "load.warmup_s=0.5", "load.min_window_requests=40", "load.max_windows=6", "load.request_timeout_s=30",
            "load.max_trials=1"]
    done = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--record", "--no-check", "-o", str(out),
                           *[x for kv in sets for x in ("--set", kv)]],
                          cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (path,) = out.glob("*.sqlite")
    with Recording.open(path) as rec:
        events = list(rec.events())
    (level,) = [e for e in events if isinstance(e, LevelResult) and e.level == 8]
    windows = [e.throughput_rps for e in events if isinstance(e, WindowResult) and e.level == 8 and not e.warmup]
    return level, windows
