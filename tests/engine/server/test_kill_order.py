"""A server's process group is killed parents first: tritonserver is gone before its Python-backend
stubs die, whatever their pids. A stub killed under a live tritonserver can leave a robust mutex
they share owner-dead, and tritonserver's next lock of it aborts it (lock_exception)."""

from __future__ import annotations

import threading
import time

import psutil
import pytest

from engine.server.embedded import EmbeddedServer, uncaught_exception
from engine.server.guard import kill_first
from engine.server.procs import Proc
from tests.engine.server.test_server import _infer_identity, _wait_gone

TOOL, GUARD, TRITON, STUB, STUB2 = 900, 30100, 30150, 120, 30200  # the stub's pid wrapped past pid_max


def _proc(pid: int, ppid: int) -> Proc:
    return Proc(pid, b"x", ppid, GUARD)


@pytest.mark.parametrize("members, first", [
    # the tool kills the group: the guard first, not the stub with the lowest pid
    ([_proc(STUB, TRITON), _proc(GUARD, TOOL), _proc(TRITON, GUARD), _proc(STUB2, TRITON)], [GUARD]),
    # the guard gone, tritonserver (now the init's child) before its stubs
    ([_proc(STUB, TRITON), _proc(TRITON, 1), _proc(STUB2, TRITON)], [TRITON]),
    # the guard kills its group (it is the caller, not a member): tritonserver first
    ([_proc(STUB, TRITON), _proc(TRITON, GUARD)], [TRITON]),
    # tritonserver gone: its orphaned stubs, all at once
    ([_proc(STUB, GUARD), _proc(STUB2, GUARD)], [STUB, STUB2]),
    ([], []),
])
def test_parents_are_killed_before_their_children(members, first):
    assert kill_first(members) == first


def test_an_uncaught_exception_in_the_log_is_named():
    log = ("I1127 05:25:20.96 http_server.cc:248] \"Timeout 29: Found 6 HTTP service connections\"\n"
           "terminate called after throwing an instance of 'boost::interprocess::lock_exception'\n"
           "  what():  boost::interprocess::lock_exception\nSignal (6) received.\n")
    assert uncaught_exception(log) == (", after an uncaught boost::interprocess::lock_exception (a Python-backend "
                                       "stub died holding a lock it shares with tritonserver)")
    assert uncaught_exception(log.replace("boost::interprocess::lock_exception", "std::bad_alloc")) == (
        ", after an uncaught std::bad_alloc")
    assert uncaught_exception("Signal (6) received.\n") == ""


def _load(url: str, answered: threading.Semaphore, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            _infer_identity(url)
            answered.release()
        except OSError:
            time.sleep(0.01)


@pytest.mark.server
@pytest.mark.slow
def test_a_server_killed_under_load_dies_before_its_stubs_and_does_not_abort(tmp_path):
    """What once aborted a server: stopped under load with a short timeout, so that the tool kills
    its whole group (guard, tritonserver, stubs) while tritonserver is still draining requests."""
    for run in range(3):
        server = EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path / f"s{run}").start()
        answered = threading.Semaphore(0)
        stop = threading.Event()
        threads = [threading.Thread(target=_load, args=(server.http_url, answered, stop), daemon=True)
                   for _ in range(4)]
        for thread in threads:
            thread.start()
        for _ in range(40):  # the stub is busy answering when the group is killed
            assert answered.acquire(timeout=60), "the server stopped answering before the stop"
        family = {p.pid for p in psutil.Process(server.pid).children(recursive=True)}
        server.stop(timeout=0.5)  # tritonserver is still draining: the tool kills the group
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        assert not _wait_gone(family), "a tritonserver or a stub outlived stop()"
        assert server.log_path is not None
        log = server.log_path.read_text(errors="replace")
        assert uncaught_exception(log) == "", log[-2000:]
        assert not server.left_behind
