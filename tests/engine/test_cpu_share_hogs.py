"""The others' CPU share against what the hogs themselves used: read at the same instants,
others (every process neither ours nor the server's) is never below the hogs' own CPU time, and
ours is never below our own busy child's, however the scheduler shares the cores out."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.hogs import cpu_hogs
from engine.cpu_share import CLOCK_TICKS, read_cpu, share_between
from engine.hostinfo import process_cores

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc/stat")


def _cpu_s(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        t = psutil.Process(pid).cpu_times()
        total += t.user + t.system
    return total


@pytest.mark.noise
def test_others_share_covers_what_the_hogs_took(tmp_path: Path) -> None:
    cores = process_cores()
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # ours: a child of this process
    try:
        with cpu_hogs(cores, tmp_path) as hogs:
            for _ in range(5):
                a, hogs_a, ours_a = read_cpu(), _cpu_s(hogs), _cpu_s([spin.pid])
                time.sleep(0.5)  # the interval read (not a wait for anything)
                b, hogs_b, ours_b = read_cpu(), _cpu_s(hogs), _cpu_s([spin.pid])
                share = share_between(a, b)
                assert share is not None and a is not None and b is not None
                capacity = (b.at - a.at) * b.cores
                # one clock tick per core and reading either way: /proc's resolution
                slack = 2 * b.cores / CLOCK_TICKS / capacity + 0.02
                hogs_share = (hogs_b - hogs_a) / capacity
                assert share.others + slack >= hogs_share, (share, hogs_share)
                assert share.ours + slack >= (ours_b - ours_a) / capacity, (share, ours_b - ours_a)
    finally:
        spin.kill()
        spin.wait()
