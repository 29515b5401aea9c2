"""The session's side of the load workers: start them, talk to them, make sure they are gone.

Workers are plain subprocesses (``python -m engine.load.worker``) rather than multiprocessing
"spawn" children: spawn re-imports the parent's ``__main__`` in every child, which for the TUI
means importing Textual in each load worker. A subprocess imports only the worker module.
Messages (engine/load/worker_messages.py) are pickled over a socket pair
(multiprocessing.connection framing), read on the session's event loop with ``add_reader``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, TypeVar

import engine
from engine.cpu_share import process_cpu_seconds
from engine.load.worker_messages import Exit, Fatal, FromWorker, Gone, Hello, ToWorker

_PACKAGE_ROOT = str(Path(engine.__file__).resolve().parent.parent)
# A starting worker (python + numpy import) is waited for while it spends CPU: on a busy box the
# import takes many times its idle second. Given up after START_QUIET_S with no CPU time spent,
# or START_MOST_S in all.
START_QUIET_S = 30.0
START_MOST_S = 300.0
START_LOOK_S = 0.5
EXIT_TIMEOUT_S = 3.0
M = TypeVar("M", bound=FromWorker)


@dataclass
class StartWatch:
    """One starting worker's last sign of progress: the CPU seconds it had spent, and when."""

    since: float
    cpu_s: float | None = None

    def quiet_for(self, now: float, cpu_s: float | None) -> float | None:
        """How long it has spent no CPU once that reaches START_QUIET_S; None while it works
        (or its CPU time cannot be read: then only START_MOST_S bounds the wait)."""
        if cpu_s is None or cpu_s != self.cpu_s:
            self.since, self.cpu_s = now, cpu_s
            return None
        return now - self.since if now - self.since >= START_QUIET_S else None


class WorkerGone(Exception):
    """A load worker exited or stopped answering."""


class WorkerPool:
    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError("at least one worker")
        self.count = count
        self.procs: list[subprocess.Popen[bytes]] = []
        self.conns: list[Connection] = []
        self.logs: list[IO[bytes]] = []
        self.inbox: asyncio.Queue[tuple[int, FromWorker]] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
        # a worker multiplies no matrices: numpy's OpenBLAS would start a thread a core at import,
        # in every worker (0.07 CPU-s of its start on 2 cores; threads idle beside the load)
        env["OPENBLAS_NUM_THREADS"] = "1"
        try:
            for index in range(self.count):
                ours, theirs = socket.socketpair()
                # stderr to a file, never the terminal (the TUI owns it); read back if it dies
                log = tempfile.TemporaryFile()
                self.logs.append(log)
                proc = subprocess.Popen(
                    [sys.executable, "-m", "engine.load.worker", str(theirs.fileno()), str(index)],
                    pass_fds=[theirs.fileno()],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    close_fds=True,
                )
                theirs.close()
                conn = Connection(ours.detach())
                self.procs.append(proc)
                self.conns.append(conn)
                self._loop.add_reader(conn.fileno(), self._on_readable, index)
            await self._until_hello()
        except BaseException:
            await self.close()
            raise

    async def _until_hello(self) -> None:
        """Until every worker said Hello; WorkerGone for one that exited, spent no CPU for
        START_QUIET_S, or all that took START_MOST_S."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        pending = {i: StartWatch(started) for i in range(self.count)}
        while pending:
            try:
                index, msg = await asyncio.wait_for(self.inbox.get(), START_LOOK_S)
            except TimeoutError:
                index, msg = -1, None
            if isinstance(msg, (Gone, Fatal)):
                raise WorkerGone(msg.message)
            if isinstance(msg, Hello):
                pending.pop(index, None)
            now = loop.time()
            for i, watch in pending.items():
                if quiet := watch.quiet_for(now, process_cpu_seconds(self.procs[i].pid)):
                    raise WorkerGone(f"load worker {i} did not start: no CPU time spent for {quiet:.0f} s")
            if pending and now - started >= START_MOST_S:
                raise WorkerGone(f"load workers did not start within {START_MOST_S:g} s")

    def _on_readable(self, index: int) -> None:
        conn = self.conns[index]
        try:
            while conn.poll():
                self.inbox.put_nowait((index, conn.recv()))
        except (EOFError, OSError):
            assert self._loop is not None
            self._loop.remove_reader(conn.fileno())
            try:
                code: int | None = self.procs[index].wait(timeout=1.0)  # it is exiting: reap it
            except subprocess.TimeoutExpired:
                code = None
            last = self.last_output(index)
            detail = f": {last}" if last else ""
            self.inbox.put_nowait((index, Gone(f"load worker {index} exited (code {code}){detail}")))

    def last_output(self, index: int) -> str:
        """The last line a worker wrote (a traceback's last line says what killed it)."""
        log = self.logs[index]
        log.seek(0)
        lines = [line.strip() for line in log.read()[-4096:].decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1][:200] if lines else ""

    def send(self, index: int, msg: ToWorker) -> None:
        try:
            self.conns[index].send(msg)
        except (OSError, EOFError) as exc:
            raise WorkerGone(f"load worker {index} is gone: {exc}") from None

    async def receive(self, timeout_s: float) -> tuple[int, FromWorker]:
        try:
            item = await asyncio.wait_for(self.inbox.get(), timeout_s)
        except TimeoutError:
            raise WorkerGone(f"load workers did not answer within {timeout_s:g} s") from None
        if isinstance(item[1], (Gone, Fatal)):
            raise WorkerGone(item[1].message)
        return item

    async def expect(self, what: type[M], timeout_s: float) -> tuple[int, M]:
        """The next message of type ``what`` (ticks of a finished level are dropped)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            left = deadline - asyncio.get_running_loop().time()
            index, msg = await self.receive(max(0.0, left))
            if isinstance(msg, what):
                return index, msg

    async def close(self) -> None:
        """Ask every worker to exit, then make sure: no worker outlives the sweep."""
        for _index, conn in enumerate(self.conns):
            try:
                if self._loop is not None:
                    self._loop.remove_reader(conn.fileno())
            except (ValueError, OSError):
                pass
            try:
                conn.send(Exit())
            except (OSError, EOFError):
                pass
        loop = asyncio.get_running_loop()
        deadline = loop.time() + EXIT_TIMEOUT_S
        for proc in self.procs:
            while proc.poll() is None and loop.time() < deadline:
                await asyncio.sleep(0.02)
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=EXIT_TIMEOUT_S)
        for conn in self.conns:
            conn.close()
        for log in self.logs:
            log.close()
        self.procs.clear()
        self.conns.clear()
        self.logs.clear()

