"""Which HTTP thread of a Triton server on this machine serves each connection (Linux /proc).

Why: Triton's HTTP front end (libevhtp) hands each new connection to one of its threads for
good, and a thread that reads the bodies of too many connections caps the server unseen by both
Triton's statistics and the client. This module makes the spread visible: the session warns when
one thread holds more than twice its share, and the `fidelity` bench prints each tool's spread.
The measurements behind it: docs/results/design_notes.md ("HTTP threads").

How: each HTTP thread runs its own epoll instance, and /proc/<pid>/fdinfo/<epoll fd> lists the
sockets it watches (``tfd:`` lines). A connection is listed while its thread waits for its next
request (always, for a new connection with nothing sent yet), so samples are unioned; a
connection never moves, so what was seen once stays true while the connection lives. Pure reads
of /proc: nothing here can disturb the server. Works for any server process this user may read
(the embedded one, or a remote-mode server on this machine, found from its port by
listener_pid); elsewhere every answer is empty.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from collections import Counter

_TFD = re.compile(r"tfd:\s+(\d+)")
_SOCKET = re.compile(r"socket:\[(\d+)\]")
_THREADS_ARG = re.compile(r"--http-thread-count(?:=|\x00)(\d+)")
TRITON_DEFAULT_HTTP_THREADS = 8
UNEVEN_FACTOR = 2.0  # the busiest thread holds more than twice its fair share: worth saying
THREAD_BUSY_PCT = 90.0  # an HTTP thread this busy (of one core) is what caps the connections it holds
# epoll_wait, epoll_pwait, epoll_pwait2 by architecture: the call an idle HTTP thread sits in
_EPOLL_CALLS = {"x86_64": {232, 281, 441}, "aarch64": {22, 441}}


def available() -> bool:
    """Linux's /proc with per-descriptor info: elsewhere there is no spread to watch."""
    return sys.platform == "linux" and os.path.isdir("/proc/self/fdinfo")


def _tcp_rows(path_prefix: str) -> list[list[str]]:
    rows: list[list[str]] = []
    for name in ("tcp", "tcp6"):
        try:
            with open(f"{path_prefix}/net/{name}") as f:
                rows.extend(line.split() for line in f.read().splitlines()[1:])
        except OSError:
            continue
    return rows


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1], 16)


def listener_pid(port: int) -> int | None:
    """The process on this machine listening on TCP ``port`` (None where none is visible). A
    child that inherited the listening socket would hold it too: the one asked for is the
    holder whose parent does not."""
    if not available():
        return None
    inodes = {f"socket:[{cols[9]}]" for cols in _tcp_rows("/proc") if cols[3] == "0A" and _port(cols[1]) == port}
    if not inodes:
        return None
    holders: set[int] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    holders.add(int(pid))
                    break
            except OSError:
                continue
    roots = [pid for pid in holders if _parent(pid) not in holders]
    return min(roots) if roots else None


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def http_thread_count(pid: int) -> int:
    """The server's --http-thread-count (Triton's default when not given or unreadable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            match = _THREADS_ARG.search(f.read().decode(errors="replace"))
    except OSError:
        return TRITON_DEFAULT_HTTP_THREADS
    return int(match.group(1)) if match else TRITON_DEFAULT_HTTP_THREADS


class ThreadMap:
    """Client port -> the server's epoll fd (one per HTTP thread) for the live connections to
    ``port``, unioned over samples. ``sample`` costs one read of net/tcp, one fdinfo read per
    epoll instance and one readlink per watched socket (about a millisecond for 256)."""

    def __init__(self, pid: int, port: int) -> None:
        self.pid, self.port = pid, port
        self.known: dict[int, int] = {}
        self._epolls: list[int] | None = None

    def _find_epolls(self) -> list[int]:
        found = []
        for fd in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                if os.readlink(f"/proc/{self.pid}/fd/{fd}") == "anon_inode:[eventpoll]":
                    found.append(int(fd))
            except OSError:
                continue
        return found

    def sample(self) -> dict[int, int]:
        try:
            inode_port = {cols[9]: _port(cols[2]) for cols in _tcp_rows(f"/proc/{self.pid}")
                          if cols[3] == "01" and _port(cols[1]) == self.port}
            if self._epolls is None:
                self._epolls = self._find_epolls()
            for epoll in self._epolls:
                try:
                    with open(f"/proc/{self.pid}/fdinfo/{epoll}") as f:
                        targets = _TFD.findall(f.read())
                except OSError:
                    continue
                for target in targets:
                    try:
                        match = _SOCKET.match(os.readlink(f"/proc/{self.pid}/fd/{target}"))
                    except OSError:
                        continue
                    if match and match.group(1) in inode_port:
                        self.known[inode_port[match.group(1)]] = epoll
        except (OSError, ValueError, IndexError):
            return self.known
        live = set(inode_port.values())
        self.known = {port: epoll for port, epoll in self.known.items() if port in live}
        return self.known

    def counts(self) -> Counter[int]:
        return Counter(self.known.values())


def epoll_of_syscall(text: str, machine: str | None = None) -> int | None:
    """The epoll fd a thread waits on, from its /proc/<pid>/task/<tid>/syscall line ("232 0x5 ...":
    the call's number, then its arguments, the first being the epoll fd); None when it is in
    another call, running ("running"), or the architecture is not known."""
    calls = _EPOLL_CALLS.get(machine or platform.machine())
    parts = text.split()
    if not calls or len(parts) < 2 or not parts[0].isdigit() or int(parts[0]) not in calls:
        return None
    try:
        return int(parts[1], 16)
    except ValueError:
        return None


def thread_cpu_seconds(stat: str) -> float | None:
    """utime + stime of a /proc/.../stat line, in seconds."""
    try:
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError, OSError):
        return None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


class ThreadCpu:
    """Which thread of ``pid`` waits on each epoll fd (an HTTP thread runs one epoll instance
    and waits on it between requests: unioned over samples), and each thread's CPU time."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.epoll_tid: dict[int, int] = {}

    def _tids(self) -> list[int]:
        try:
            return [int(t) for t in os.listdir(f"/proc/{self.pid}/task") if t.isdigit()]
        except OSError:
            return []

    def sample(self, wanted: set[int]) -> None:
        """Map the epoll fds in ``wanted`` not mapped yet to the threads waiting on them now."""
        if wanted <= set(self.epoll_tid):
            return
        for tid in self._tids():
            text = _read(f"/proc/{self.pid}/task/{tid}/syscall")
            epoll = epoll_of_syscall(text) if text else None
            if epoll is not None:
                self.epoll_tid.setdefault(epoll, tid)

    def cpu(self, tid: int) -> float | None:
        text = _read(f"/proc/{self.pid}/task/{tid}/stat")
        return thread_cpu_seconds(text) if text else None


class SpreadWatch:
    """Where a level's live connections sit, from samples over the level: the fullest picture
    of the connections live at one time (one closed early, or a spare the workers opened and
    closed while spreading, is not counted)."""

    def __init__(self, pid: int, port: int, most: int = 0) -> None:
        self.threads = ThreadMap(pid, port)
        self.owners: dict[int, int] = {}
        self.most = most  # pictures with more live connections than this hold spares: skipped
        self.cpu = ThreadCpu(pid)
        self._cpu_start: dict[int, tuple[float, float]] = {}  # tid -> (when, its CPU seconds then)

    def sample(self) -> None:
        live = self.threads.sample()
        self.cpu.sample(set(live.values()))
        for tid in self.cpu.epoll_tid.values():
            if tid not in self._cpu_start and (seconds := self.cpu.cpu(tid)) is not None:
                self._cpu_start[tid] = (time.monotonic(), seconds)  # first seen during the level: from now
        if self.most and len(live) > self.most:
            return
        if len(live) >= len(self.owners):  # the fullest picture: the level's connections all open
            self.owners = dict(live)

    def reset(self) -> None:
        self.owners = {}
        self.threads.known = {}
        now = time.monotonic()
        self._cpu_start = {tid: (now, s) for tid in self.cpu.epoll_tid.values() if (s := self.cpu.cpu(tid)) is not None}

    def busiest_cpu_percent(self) -> float | None:
        """CPU (% of one core) since the level's start of the HTTP thread holding the most of our
        connections; None when that thread was never seen waiting on its epoll fd."""
        if not self.owners:
            return None
        epoll = Counter(self.owners.values()).most_common(1)[0][0]
        tid = self.cpu.epoll_tid.get(epoll)
        if tid is None or tid not in self._cpu_start or (now := self.cpu.cpu(tid)) is None:
            return None
        since, before = self._cpu_start[tid]
        elapsed = time.monotonic() - since
        return (now - before) / elapsed * 100.0 if elapsed > 0 else None

    def per_thread(self) -> list[int]:
        """Connections per HTTP thread that holds any, busiest first."""
        return sorted(Counter(self.owners.values()).values(), reverse=True)


def uneven(per_thread: list[int], http_threads: int, opened: int = 0) -> str | None:
    """A one-line finding when the busiest thread holds more than UNEVEN_FACTOR times its fair
    share of the connections seen (fair: spread over min(threads, connections)); None otherwise.
    ``opened``: the level's connections, when known. A connection is seen only while its thread
    waits for its next request, so with short requests some are never caught between two."""
    total = sum(per_thread)
    if total < 2 or http_threads < 2:
        return None
    fair = total / min(http_threads, total)
    if per_thread[0] <= UNEVEN_FACTOR * fair:
        return None
    unseen = f"; {opened - total} more were busy at every sample" if opened > total else ""
    return (f"the server's HTTP front end holds {per_thread[0]} of our {total} connections seen on one of its "
            f"{http_threads} threads ({len(per_thread)} in use: {'/'.join(map(str, per_thread))}{unseen}): that "
            f"thread may cap throughput below what the model can do")


def thread_limit(per_thread: list[int], http_threads: int, busiest_cpu_percent: float | None,
                 opened: int = 0) -> str | None:
    """The spread only where it changes the figures: uneven, and the busiest thread measured near
    a full core (THREAD_BUSY_PCT), so that it is what holds its connections back. None else."""
    finding = uneven(per_thread, http_threads, opened)
    if finding is None or busiest_cpu_percent is None or busiest_cpu_percent < THREAD_BUSY_PCT:
        return None
    return (f"{finding.removesuffix(': that thread may cap throughput below what the model can do')}: that thread "
            f"ran at {busiest_cpu_percent:.0f} % of a core, so it caps throughput below what the model can do "
            "(more HTTP threads: --http-thread-count; inputs off the body: load.transport = system_shm)")


def child_named(parent: int, name: str) -> int | None:
    """The pid of ``parent``'s child process called ``name`` (tritonserver under its guard)."""
    if not available():
        return None
    try:
        for task in os.listdir(f"/proc/{parent}/task"):
            with open(f"/proc/{parent}/task/{task}/children") as f:
                for pid in f.read().split():
                    with open(f"/proc/{pid}/comm") as c:
                        if c.read().strip() == name:
                            return int(pid)
    except OSError:
        return None
    return None
