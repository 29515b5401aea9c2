"""Keeps tritonserver from outliving us.

Run as ``python -m engine.server.guard -- tritonserver ARGS``, in a new session (its own process
group), with its stdin a pipe from the tool. The guard starts tritonserver in its group and
waits. When the pipe closes — the tool exited, crashed, or was killed with SIGKILL — or the guard
gets SIGTERM, it ends the whole group (tritonserver and its Python-backend stubs): SIGTERM, then
SIGKILL after a grace period. No orphaned tritonserver, whatever happens to the tool.

The guard exits only when the group is empty: a SIGKILLed process is not gone when kill()
returns (a Python-backend stub holding GPU memory takes a moment, the driver frees its memory
first), and a study that starts the next server and reads the GPUs at once saw the previous
server's stub still there. The guard is the child subreaper of its group (PR_SET_CHILD_SUBREAPER),
so the stubs that tritonserver's death orphans come to it, and it reaps them before it exits.

If the guard itself is killed first (SIGKILL), tritonserver gets SIGTERM from the kernel
(PR_SET_PDEATHSIG): its own shutdown ends its Python-backend stubs (a SIGKILL would leave them
running, as nobody is left to kill the group). With
``--cleanup DIR`` the guard removes the server's scratch folder when the tool died without
doing so, so a SIGKILL of the tool leaves no /tmp/gpuscale-triton-* behind; with
``--shm-prefix P`` it also removes the tool's /dev/shm/P* shared-memory segments. With ``--mps
DIR`` it first starts a private MPS control daemon (engine/server/mps.py) whose pipe and log
folders are in DIR, and starts tritonserver as its client; once tritonserver and its stubs are
gone it tells the daemon to quit, and the group kill ends whatever is left of it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from engine.server.mps import MpsDaemon, find_control
from engine.server.procs import Proc, live_processes
from engine.shm_segments import PYTHON_BACKEND_REGION, remove_segments

GRACE_S = 10.0  # tritonserver's own shutdown (unload, stubs' finalize) before SIGKILL
REAP_S = 10.0  # after SIGKILL, how long the group's processes get to leave (the driver frees GPU memory)
MPS_FAILED = "MPS daemon did not start:"  # the log line the embedded server looks for (then runs without)
MPS_EXIT = 125  # the guard's status when it did not start tritonserver because MPS did not start


def _end_group(child: subprocess.Popen[bytes] | None, mps: MpsDaemon | None = None) -> list[int]:
    """End tritonserver and everything else in our group; the pids still alive after REAP_S
    (normally none). The MPS daemon outlives its clients, then is told to quit."""
    if child is not None:
        _end_child(child)
    # stubs and anything else left in our group; not the guard itself, which still has to clean
    # up and say how tritonserver ended (its exit status)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pgid = os.getpgid(0)
    if mps is None:
        return kill_group_and_wait(pgid, REAP_S, reap=True)
    kill_group_and_wait(pgid, REAP_S, reap=True, spare=mps.pids)
    mps.quit()
    return kill_group_and_wait(pgid, REAP_S, reap=True)


def _end_child(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    child.kill()
    child.wait()


def kill_group_and_wait(
    pgid: int, timeout_s: float, *, reap: bool = False, spare: Callable[[], set[int]] | None = None
) -> list[int]:
    """SIGKILL every live process of group ``pgid`` (but the caller) until none is left or
    ``timeout_s`` passed; the pids still alive then. Parents go first: a process is killed once
    no live ancestor in the group is left (``kill_first``), so that tritonserver is gone before
    its Python-backend stubs die. A stub killed under a live tritonserver can leave one of the
    robust mutexes they share owner-dead; tritonserver's next lock of it throws
    boost::interprocess::lock_exception and it aborts (docs/results/python_backend_lock_exception.md).
    Past half the time, whatever is left is killed at once. ``reap``: also collect our own ended
    children (the guard, as subreaper, inherits the orphaned stubs: unreaped, they would stay
    zombies in the group). ``spare``: pids left alone, asked again at each pass."""
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        if reap:
            _reap_children()
        members = [p for p in live_processes() if p.pgrp == pgid and p.pid != os.getpid()]
        if spare is not None:
            spared = spare()
            members = [p for p in members if p.pid not in spared]
        left = [p.pid for p in members]
        now = time.monotonic()
        if not left or now >= deadline:
            break
        for pid in kill_first(members) if now < started + timeout_s / 2 else left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    if reap:
        _reap_children()
    return left


def kill_first(members: list[Proc]) -> list[int]:
    """The members to kill now: those whose parent is not a member (the guard, or tritonserver
    once the guard is gone), not their children. Not pid order: pids wrap (pid_max 32768 on a
    busy box), and a stub can have a lower pid than its tritonserver."""
    pids = {p.pid for p in members}
    return [p.pid for p in members if p.ppid not in pids]


def _reap_children() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group, but the caller. A zombie is not counted: it has ended
    and released its memory (GPU memory included); only its exit status waits for its parent."""
    return [p.pid for p in live_processes() if p.pgrp == pgid and p.pid != os.getpid()]


def process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return f"{fh.read().strip()} ({pid})"
    except OSError:
        return str(pid)


PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
HAVE_PRCTL = sys.platform == "linux"


def _become_subreaper() -> None:
    """Orphaned descendants (the stubs, once tritonserver is gone) are re-parented to us, not to
    the container's init, so that we can reap them and know when they are gone."""
    if not HAVE_PRCTL:  # not Linux: the wait for the group still holds
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the wait for the group still holds
        pass


def _die_with_parent() -> None:
    """In the child, before exec: the kernel sends SIGTERM when the guard dies, however it dies."""
    if not HAVE_PRCTL:  # not Linux: the pipe and the group kill still hold
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the pipe and the group kill still hold
        pass
    if os.getppid() == 1:  # the guard died before prctl took effect
        os._exit(1)


def exit_status(code: int) -> int:
    """tritonserver's end as the guard's exit status: a signal N as 128 + N, as shells do."""
    return 128 - code if code < 0 else code


def main(argv: list[str]) -> int:
    options: dict[str, str] = {}
    while len(argv) >= 2 and argv[0] in ("--cleanup", "--shm-prefix", "--server-shm-prefix", "--mps", "--cpus"):
        options[argv[0]] = argv[1]
        argv = argv[2:]
    cleanup, shm_prefix = options.get("--cleanup"), options.get("--shm-prefix")
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: python -m engine.server.guard [--cleanup DIR] [--shm-prefix PREFIX] [--server-shm-prefix PREFIX] "
              "[--mps DIR] [--cpus 0,1] -- COMMAND [ARGS]",
              file=sys.stderr)
        return 2
    if options.get("--cpus"):  # the server and its stubs inherit it, e.g. apart from the client's cores
        os.sched_setaffinity(0, {int(c) for c in options["--cpus"].split(",")})
    orphaned = threading.Event()
    try:
        return _guard(argv[1:], orphaned, options.get("--mps"))
    finally:
        if cleanup and orphaned.is_set():  # the tool is gone and cannot clean up after itself
            shutil.rmtree(cleanup, ignore_errors=True)
        if shm_prefix and orphaned.is_set():
            remove_segments(shm_prefix)
        server_prefix = options.get("--server-shm-prefix")
        if server_prefix and server_prefix.startswith(PYTHON_BACKEND_REGION):  # its server and stubs are gone
            remove_segments(server_prefix)


def _guard(command: list[str], orphaned: threading.Event, mps_dir: str | None = None) -> int:
    _become_subreaper()
    mps = None
    if mps_dir is not None:
        control = find_control()
        mps = MpsDaemon(control, Path(mps_dir)) if control else None
        why = mps.start(_die_with_parent) if mps else "nvidia-cuda-mps-control not found"
        if why is not None:
            print(f"[guard] {MPS_FAILED} {why}", file=sys.stderr, flush=True)
            _end_group(None)
            return MPS_EXIT
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,  # noqa: PLW1509
                             env=mps.env if mps else None)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the tool, which stops us itself

    def watch_pipe() -> None:
        try:
            while sys.stdin.buffer.read(1):
                pass
        except OSError:
            pass
        orphaned.set()
        stop.set()

    threading.Thread(target=watch_pipe, daemon=True).start()
    while not stop.is_set():
        if child.poll() is not None:
            break
        stop.wait(0.2)
    code = child.poll()
    if code is not None:
        print(f"[guard] tritonserver exited with code {code}", file=sys.stderr, flush=True)
    left = _end_group(child, mps)  # also when tritonserver exited by itself: its stubs go with it
    if left:
        print(f"[guard] still alive {REAP_S:.0f} s after SIGKILL: {', '.join(map(process_name, left))}",
              file=sys.stderr, flush=True)
    return 0 if code is None else exit_status(code)


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # not sys.exit: the pipe-watching thread holds stdin's lock, and interpreter shutdown with a
    # daemon thread inside a buffered read aborts (SIGABRT), which would hide how the server ended
    os._exit(status)
