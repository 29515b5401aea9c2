"""The HTTP front-end spread is said only where it changes the figures: the busiest thread
measured near a full core. Thread <-> epoll fd and thread CPU come from /proc."""

from __future__ import annotations

import os
import select
import threading
import time

import pytest

from engine.http_threads import ThreadCpu, epoll_of_syscall, thread_cpu_seconds, thread_limit

HANG_S = 600.0  # a bound on a thread that never gets there, not a measure of speed


def test_an_uneven_spread_with_an_idle_thread_is_not_said() -> None:
    # 33 of 128 on one of 16 threads: uneven, but the thread has room: the user can do nothing, nothing changes
    assert thread_limit([33, 20, 15, 10, 10, 10, 10, 10, 10], 16, busiest_cpu_percent=45.0, opened=128) is None
    assert thread_limit([33, 20, 15, 10, 10, 10, 10, 10, 10], 16, busiest_cpu_percent=None, opened=128) is None


def test_a_busiest_thread_at_its_core_is_said_with_its_cpu() -> None:
    text = thread_limit([33, 20, 15, 10, 10, 10, 10, 10, 10], 16, busiest_cpu_percent=98.0, opened=128)
    assert text is not None and "holds 33 of our 128 connections" in text and "98 % of a core" in text
    assert thread_limit([8, 8, 8, 8], 4, busiest_cpu_percent=99.0) is None  # even: no thread holds more than its share


def test_syscall_and_stat_lines() -> None:
    assert epoll_of_syscall("232 0x7 0x7ffd 0x40 0xffffffff 0x0 0x0 0x7ffd 0x7f00", "x86_64") == 7
    assert epoll_of_syscall("281 0x1c 0x7ffd 0x40 0xffffffff 0x0 0x8 0x7ffd 0x7f00", "x86_64") == 28
    assert epoll_of_syscall("0 0x3 0x7ffd", "x86_64") is None  # read(): not waiting on an epoll
    assert epoll_of_syscall("running", "x86_64") is None
    assert epoll_of_syscall("232 0x7", "sparc") is None
    stat = "123 (trition http) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0"
    assert thread_cpu_seconds(stat) == pytest.approx(300 / os.sysconf("SC_CLK_TCK"))


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux /proc")
def test_the_thread_waiting_on_an_epoll_fd_is_found_with_its_cpu() -> None:
    ep = select.epoll()
    stop = threading.Event()
    polling = threading.Event()
    tid: list[int] = []

    def waiter() -> None:
        tid.append(threading.get_native_id())
        while time.thread_time() < 0.25:  # some CPU of its own first (however busy the machine)
            pass
        polling.set()
        while not stop.is_set():
            ep.poll(0.2)

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        watch = ThreadCpu(os.getpid())
        # waits for the spin to end (seconds on a starved box), then for a sample that finds the
        # thread in its epoll_wait; the bound is for a hang only
        assert polling.wait(HANG_S)
        deadline = time.monotonic() + HANG_S
        while ep.fileno() not in watch.epoll_tid and time.monotonic() < deadline:
            watch.sample({ep.fileno()})
            time.sleep(0.05)
        if not os.access(f"/proc/{os.getpid()}/task/{tid[0]}/syscall", os.R_OK):
            pytest.skip("/proc/<pid>/task/<tid>/syscall is not readable here")
        assert watch.epoll_tid.get(ep.fileno()) == tid[0]
        cpu = watch.cpu(tid[0])
        assert cpu is not None and cpu >= 0.2  # the spin above
    finally:
        stop.set()
        thread.join()
        ep.close()


@pytest.mark.server
async def test_a_real_servers_busiest_http_thread_has_a_measured_cpu(identity_server) -> None:
    """Against tritonserver: the thread holding our connections is found from its epoll fd, and
    its CPU over the level read from /proc."""
    import asyncio

    from engine.events import LevelStarted
    from engine.http_threads import SpreadWatch, child_named
    from engine.load.sweep import run_sweep
    from engine.profiles import Load
    from engine.triton.api import TritonApi
    from engine.triton.target import Target, describe_target

    target = Target(identity_server.http_url, "identity")
    info = await describe_target(target)
    pid = child_named(identity_server.pid, "tritonserver")
    assert pid is not None
    watch = SpreadWatch(pid, int(identity_server.http_url.rsplit(":", 1)[1]))
    started = asyncio.Event()

    def on_event(event: object) -> None:
        if isinstance(event, LevelStarted):
            watch.reset()
            started.set()

    load = Load(concurrency=[8], window_ms=500, min_window_requests=20, warmup_s=0.3, max_windows=4,
                stability_percent=50.0, stable_windows=2, request_timeout_s=5.0)
    task = asyncio.create_task(run_sweep(TritonApi(target, info), load, on_event, asyncio.Event()))
    while not task.done():
        if started.is_set():
            await asyncio.to_thread(watch.sample)
        await asyncio.sleep(0.05)
    await task
    if not os.access(f"/proc/{pid}/task/{pid}/syscall", os.R_OK):
        pytest.skip("/proc/<pid>/task/<tid>/syscall is not readable here")
    cpu = watch.busiest_cpu_percent()
    assert cpu is not None and 0.0 <= cpu <= 100.0 * (os.cpu_count() or 1)
