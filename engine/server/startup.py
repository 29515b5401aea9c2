"""When a starting tritonserver has taken too long: the wait follows what the server does, not
the clock. It is given up only after ``quiet_s`` with no sign of progress: no new line in its log
and no CPU time spent by its processes (tritonserver and its Python-backend stubs, one process
group). On a busy box a start takes many times its idle length, yet keeps making progress; a
server that hangs makes none. ``MAX_QUIETS`` quiet periods bound the whole start all the same (a
model whose initialisation loops forever)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_QUIETS = 10  # the longest start: this many times startup_timeout_s
PROBE_TIMEOUTS = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)  # a readiness probe that timed out waits longer next time


@dataclass
class StartupProgress:
    quiet_s: float
    started: float
    last_sign: float = field(init=False)
    _seen: tuple[int, int] = (-1, -1)  # log size, CPU ticks

    def __post_init__(self) -> None:
        self.last_sign = self.started

    def observe(self, now: float, log_size: int, cpu_ticks: int) -> None:
        """What the server shows now: a longer log or more CPU time is progress."""
        seen = (log_size, cpu_ticks)
        if seen != self._seen:
            if self._seen != (-1, -1):
                self.last_sign = now
            self._seen = seen

    def given_up(self, now: float) -> str | None:
        """Why the wait ends ("no progress for 180 s ..."), or None while it goes on."""
        if now - self.last_sign >= self.quiet_s:
            return f"no progress for {now - self.last_sign:.0f} s: no new log line and no CPU time"
        if now - self.started >= self.quiet_s * MAX_QUIETS:
            return f"still starting at {MAX_QUIETS} x server.startup_timeout_s"
        return None


def next_probe_timeout(current: float) -> float:
    """The probe after one that timed out waits longer: on a loaded box an answer can take seconds."""
    return next((t for t in PROBE_TIMEOUTS if t > current), PROBE_TIMEOUTS[-1])


def group_members(pgid: int) -> Iterator[tuple[str, list[bytes]]]:
    """(pid, /proc/PID/stat's fields after the name: state ppid pgrp ...) of each live process of
    group ``pgid``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 12 and int(fields[2]) == pgid:
            yield entry, fields


def group_cpu_ticks(pgid: int) -> int:
    """CPU time (clock ticks, user + system) of the live processes of group ``pgid``, from /proc."""
    return sum(int(fields[11]) + int(fields[12]) for _, fields in group_members(pgid))  # utime, stime
