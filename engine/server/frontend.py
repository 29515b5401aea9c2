"""Which of the embedded server's HTTP threads serves each of our connections (Linux /proc).

Why (issue 13): Triton's HTTP front end hands each new connection to one of its threads, for
good. How even that is depends on timing: on the 2-core development box, 32 connections opened
in one burst all went to ONE thread of eight; opened one at a time while the open ones carried
load they spread as 7/7/6/4/3/2/2/1, and perf_analyzer's as 8/7/6/5/2/2/1/1 or 14/11/5/2 - and
on a box with other load, ours too went 32 on one thread. A thread that reads every 602 KB body
of a third of the connections caps the server below what its GPUs do, and the client cannot see
why. For the embedded server we can: each HTTP thread runs its own epoll instance, and
/proc/<pid>/fdinfo/<epoll fd> lists the sockets it watches (``tfd:`` lines). A connection is
listed only while the thread waits for its next request, so a level samples several times and
keeps the union. Pure reads of /proc; nothing here can disturb the server.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field

_TFD = re.compile(r"tfd:\s+(\d+)")
_SOCKET = re.compile(r"socket:\[(\d+)\]")
UNEVEN_FACTOR = 2.0  # the busiest thread holds more than twice its fair share: worth saying


def connection_owners(pid: int, port: int) -> dict[int, int]:
    """Client port -> the server's epoll fd (one per HTTP thread) now watching that connection.
    Empty where /proc cannot be read (another OS, another user's process)."""
    try:
        inode_port: dict[str, int] = {}
        with open(f"/proc/{pid}/net/tcp") as f:
            for line in f.read().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "01" and int(cols[1].split(":")[1], 16) == port:  # established, ours
                    inode_port[cols[9]] = int(cols[2].split(":")[1], 16)
        fd_port: dict[int, int] = {}
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                match = _SOCKET.match(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
            if match and match.group(1) in inode_port:
                fd_port[int(fd)] = inode_port[match.group(1)]
        owners: dict[int, int] = {}
        for fd in os.listdir(f"/proc/{pid}/fdinfo"):
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    text = f.read()
            except OSError:
                continue
            for target in _TFD.findall(text):
                if int(target) in fd_port:
                    owners[fd_port[int(target)]] = int(fd)
        return owners
    except (OSError, ValueError, IndexError):
        return {}


@dataclass
class SpreadWatch:
    """The union of several samples over one level."""

    pid: int
    port: int
    owners: dict[int, int] = field(default_factory=dict)

    def sample(self) -> None:
        self.owners.update(connection_owners(self.pid, self.port))

    def per_thread(self) -> list[int]:
        """Connections per HTTP thread that holds any, busiest first."""
        return sorted(Counter(self.owners.values()).values(), reverse=True)


def uneven(per_thread: list[int], http_threads: int) -> str | None:
    """A one-line finding when the busiest thread holds more than UNEVEN_FACTOR times its fair
    share of the connections (fair: spread over min(threads, connections)); None otherwise."""
    total = sum(per_thread)
    if total < 2 or http_threads < 2:
        return None
    fair = total / min(http_threads, total)
    if per_thread[0] <= UNEVEN_FACTOR * fair:
        return None
    return (f"the server's HTTP front end holds {per_thread[0]} of our {total} connections on one of its "
            f"{http_threads} threads ({len(per_thread)} in use: {'/'.join(map(str, per_thread))}): that thread "
            f"may cap throughput below what the model can do")


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
