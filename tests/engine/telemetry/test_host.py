"""Host telemetry on this machine's real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import namedtuple

import psutil
import pytest

from engine.telemetry.host import HostReader, OwnProcesses, cpu_busy_percent

BURN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"


def test_cpu_busy_percent_from_two_snapshots():
    T = namedtuple("T", "user nice system idle iowait irq softirq steal guest guest_nice")
    a = T(100, 0, 50, 800, 50, 0, 0, 0, 10, 0)
    b = T(160, 0, 70, 900, 70, 0, 0, 0, 30, 0)  # +80 busy (guest is inside user), +120 idle
    assert cpu_busy_percent(a, b) == pytest.approx(80 / 200 * 100)
    assert cpu_busy_percent(a, a) is None


def _spawn(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(5)


@pytest.mark.slow
def test_own_cpu_counts_a_busy_child_like_its_own_cpu_times():
    child = _spawn([sys.executable, "-c", BURN])
    try:
        watch = psutil.Process(child.pid)
        own = OwnProcesses(root_pid=os.getpid(), excluded_names=())
        time.sleep(0.2)  # let the child start burning
        c0, t0 = sum(watch.cpu_times()[:2]), time.time()
        assert own.sample(t0) is None  # baseline
        time.sleep(1.0)
        c1, t1 = sum(watch.cpu_times()[:2]), time.time()
        measured = own.sample(t1)
        child_only = (c1 - c0) / (t1 - t0) * 100
        assert measured is not None
        # the tree is the child plus this (sleeping) test process: at least the child's share
        # and not much more; both are read from the same kernel counters
        assert measured >= child_only * 0.9
        assert measured - child_only < 25
    finally:
        _stop(child)


def test_excluded_subtree_is_not_ours():
    # sh stays the parent of the python grandchild, as the guard/tritonserver/stub chain does
    parent = _spawn(["sh", "-c", "sleep 30; true"])
    try:
        deadline = time.time() + 5
        grandchildren: list[psutil.Process] = []
        while not grandchildren and time.time() < deadline:
            grandchildren = psutil.Process(parent.pid).children()
            time.sleep(0.05)
        assert grandchildren, "the grandchild did not start"
        sh_name = psutil.Process(parent.pid).name()
        included = {p.pid for p in OwnProcesses(os.getpid(), ())._tree()}
        excluded = {p.pid for p in OwnProcesses(os.getpid(), (sh_name,))._tree()}
        assert parent.pid in included and grandchildren[0].pid in included
        assert parent.pid not in excluded and grandchildren[0].pid not in excluded
        assert os.getpid() in excluded  # the root itself always counts
    finally:
        for p in psutil.Process(parent.pid).children(recursive=True):
            p.kill()
        _stop(parent)


def test_host_sample_fields():
    reader = HostReader()
    first = reader.read(time.time())
    assert first.cpu_percent is None and first.own_cpu_percent is None and first.net_tx_bps is None
    assert first.mem_total == psutil.virtual_memory().total
    time.sleep(0.3)
    second = reader.read(time.time())
    assert 0.0 <= second.cpu_percent <= 100.0
    assert len(second.per_core) == psutil.cpu_count()
    assert all(0.0 <= c <= 100.0 for c in second.per_core)
    assert 0 < second.mem_used <= second.mem_total
    assert second.own_cpu_percent is not None and second.own_cpu_percent >= 0.0
    assert second.net_tx_bps is not None and second.net_tx_bps >= 0.0
