"""The live processes of this machine, from /proc: what the guard and the MPS daemon's handling
need to know of them (name, parent, process group)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Proc:
    pid: int
    name: bytes  # /proc/PID/comm: the first 15 bytes of the program's name
    ppid: int
    pgrp: int


def live_processes() -> Iterator[Proc]:
    """Every process but zombies: a zombie has ended and released its memory (GPU memory
    included); only its exit status waits for its parent."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and fields[0] not in (b"Z", b"X"):
            yield Proc(int(entry), stat[stat.find(b"(") + 1:stat.rfind(b")")], int(fields[1]), int(fields[2]))
