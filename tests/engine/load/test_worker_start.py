"""Starting load workers is waited for while they work, not for a fixed time: a worker that spends
CPU is still starting (a busy box makes its imports slow); one that spends none is named."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

import engine.load.pool as pool_module
from engine.load.pool import START_QUIET_S, StartWatch, WorkerGone, WorkerPool


def test_a_worker_that_spends_cpu_is_still_starting():
    watch = StartWatch(since=0.0)
    assert watch.quiet_for(0.0, 0.10) is None
    for step in range(1, 100):  # long past START_QUIET_S, with CPU spent at every look
        assert watch.quiet_for(step * START_QUIET_S / 4, 0.10 + step * 0.01) is None


def test_a_worker_that_spends_no_cpu_is_quiet_from_its_last_sign():
    watch = StartWatch(since=0.0)
    assert watch.quiet_for(1.0, 0.5) is None  # the first reading is a sign
    assert watch.quiet_for(1.0 + START_QUIET_S / 2, 0.5) is None
    assert watch.quiet_for(1.0 + START_QUIET_S, 0.5) == pytest.approx(START_QUIET_S)


def test_unreadable_cpu_is_never_taken_for_quiet():
    watch = StartWatch(since=0.0)
    assert all(watch.quiet_for(t * START_QUIET_S, None) is None for t in range(5))


async def test_workers_start_and_say_hello():
    pool = WorkerPool(2)
    await pool.start()
    procs = list(pool.procs)
    assert all(p.poll() is None for p in procs)
    await pool.close()
    assert all(p.poll() is not None for p in procs)


async def test_a_stopped_worker_is_named_once_it_spends_no_cpu(monkeypatch):
    """A real worker process, stopped (SIGSTOP) as soon as it is started: it never says Hello and
    spends no CPU, so the start gives it up after the quiet time, naming it, and leaves no process."""
    monkeypatch.setattr(pool_module, "START_QUIET_S", 1.0)
    real_popen = subprocess.Popen
    started: list[subprocess.Popen[bytes]] = []

    def stopped_popen(*args, **kwargs):  # noqa: ANN202 - subprocess.Popen's signature
        proc = real_popen(*args, **kwargs)
        os.kill(proc.pid, signal.SIGSTOP)
        started.append(proc)
        return proc

    monkeypatch.setattr(pool_module.subprocess, "Popen", stopped_popen)
    pool = WorkerPool(1)
    with pytest.raises(WorkerGone, match=r"^load worker 0 did not start: no CPU time spent for [0-9]+ s$"):
        await pool.start()
    (proc,) = started
    assert proc.poll() is not None  # closed: killed, not left stopped
