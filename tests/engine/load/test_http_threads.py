"""The embedded server's HTTP-thread spread of our connections (engine/http_threads.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from engine.events import LevelStarted
from engine.http_threads import (
    SpreadWatch,
    child_named,
    http_thread_count,
    listener_pid,
    uneven,
)
from engine.load.sweep import run_sweep
from engine.server.embedded import http_threads
from engine.triton.api import TritonApi
from engine.triton.target import Target
from tests.engine.load.conftest import quick_load

REPO = Path(__file__).resolve().parents[3]


def test_uneven_names_a_thread_holding_more_than_twice_its_share():
    assert uneven([4, 4, 4, 4, 4, 4, 4, 4], 8) is None
    assert uneven([8, 7, 6, 5, 2, 2, 1, 1], 8) is None  # perf_analyzer's spread here: at most 2x fair
    text = uneven([32], 8)
    assert text is not None and "holds 32 of our 32 connections seen on one of its 8 threads (1 in use: 32)" in text
    text = uneven([6, 4], 64, opened=16)  # the level opened 16: 6 were never caught idle
    assert text is not None and "(2 in use: 6/4; 6 more were busy at every sample)" in text
    assert uneven([29, 3], 8) is not None
    assert uneven([2, 1], 8) is None  # three connections: fair is one per thread, 2 is not over 2x
    assert uneven([5], 1) is None  # one thread: nothing to spread over


@pytest.mark.server
# unpaced: a connection is found while it waits idle between answers; behind the suite's paced
# model each is busy at nearly every sample (9 of 12 found once)
async def test_every_connection_of_a_level_is_found_on_some_http_thread(unpaced_identity_server, identity_info):
    identity_server = unpaced_identity_server
    target = Target(identity_server.http_url, "identity")
    pid = child_named(identity_server.pid, "tritonserver")
    assert pid is not None
    port = int(identity_server.http_url.rsplit(":", 1)[1])
    watch = SpreadWatch(pid, port)
    started = asyncio.Event()

    def on_event(event: object) -> None:
        if isinstance(event, LevelStarted):  # the workers' spares are closed by T0, as the session reads it
            watch.reset()
            started.set()

    task = asyncio.create_task(run_sweep(TritonApi(target, identity_info), quick_load(concurrency=[12], window_ms=500),
                                         on_event, asyncio.Event()))
    ours: set[int] = set()  # the load workers' client ports to the server, over the level
    while not task.done():
        if started.is_set():
            await asyncio.to_thread(watch.sample)
            ours |= await asyncio.to_thread(_load_ports, port)
        await asyncio.sleep(0.02)
    await task
    # the level's 12 connections, each on one thread (the statistics reads' connections, more
    # of them on a busy box where reads are given up and made again, are not the level's)
    found = [p for p in watch.owners if p in ours]
    assert len(found) == 12, (sorted(watch.owners), sorted(ours))


def _load_ports(server_port: int) -> set[int]:
    """Client ports of this process's load workers' live connections to ``server_port``."""
    ports = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if "engine.load.worker" not in " ".join(child.cmdline()):
                continue
            ports |= {c.laddr.port for c in child.net_connections(kind="tcp")
                      if c.raddr and c.raddr.port == server_port and c.status == psutil.CONN_ESTABLISHED}
        except psutil.Error:
            continue
    return ports


def test_the_server_on_this_machine_is_found_from_its_port(identity_server):
    pid = child_named(identity_server.pid, "tritonserver")
    port = int(identity_server.http_url.rsplit(":", 1)[1])
    assert listener_pid(port) == pid
    assert http_thread_count(pid) == http_threads()  # what the embedded server was started with
    assert listener_pid(1) is None  # nothing listens there


@pytest.mark.server
@pytest.mark.unpaced  # its own server: the piling is seen on connections caught idle, as above
def test_a_session_warns_when_the_server_piles_our_connections_onto_one_thread(tmp_path: Path):
    """Opened in one burst while the server is idle (the way that lost, kept as the developer
    setting load.dev_open_burst), the connections of a level land on one HTTP thread here; the
    session says so where that thread was measured at its core (once per sweep), and says that a
    developer setting was in effect."""
    run = subprocess.run(
        [sys.executable, "-m", "tui.cli", "--record", "--output", str(tmp_path), "--no-check",
         "--set", "model.name=identity", "--set", "load.concurrency=24", "--set", "load.window_ms=500",
         "--set", "load.warmup_s=0.5", "--set", "load.max_windows=3", "--set", "load.stability_percent=90",
         "--set", "load.dev_open_burst=true"],
        cwd=REPO, capture_output=True, text=True, timeout=180,
    )
    assert run.returncode == 0, run.stderr
    said = run.stdout.count("the server's HTTP front end holds")
    assert said <= 1, run.stdout[-2000:]  # once per sweep at most
    if said:  # only where it changes the figures: the thread at its core
        assert "% of a core, so it caps throughput" in run.stdout, run.stdout[-2000:]
    assert "developer settings in effect (load.dev_open_burst = true)" in run.stdout, run.stdout[-2000:]
