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
import re
from collections import Counter

_TFD = re.compile(r"tfd:\s+(\d+)")
_SOCKET = re.compile(r"socket:\[(\d+)\]")
_THREADS_ARG = re.compile(r"--http-thread-count(?:=|\x00)(\d+)")
TRITON_DEFAULT_HTTP_THREADS = 8
UNEVEN_FACTOR = 2.0  # the busiest thread holds more than twice its fair share: worth saying


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


class SpreadWatch:
    """Where a level's live connections sit, from samples over the level: the fullest picture
    of the connections live at one time (one closed early, or a spare the workers opened and
    closed while spreading, is not counted)."""

    def __init__(self, pid: int, port: int, most: int = 0) -> None:
        self.threads = ThreadMap(pid, port)
        self.owners: dict[int, int] = {}
        self.most = most  # pictures with more live connections than this hold spares: skipped

    def sample(self) -> None:
        live = self.threads.sample()
        if self.most and len(live) > self.most:
            return
        if len(live) >= len(self.owners):  # the fullest picture: the level's connections all open
            self.owners = dict(live)

    def reset(self) -> None:
        self.owners = {}
        self.threads.known = {}

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


def child_named(parent: int, name: str) -> int | None:
    """The pid of ``parent``'s child process called ``name`` (tritonserver under its guard)."""
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
