"""How Ctrl-C, SIGTERM and SIGHUP end a command: a session is asked to stop and given time to end;
a command without a session is interrupted at once."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable

from tui.commands.exits import PROG

HARD_STOP_S = 30.0  # after a second Ctrl-C: the longest we still wait for the session to end


class StopSignals:
    """SIGINT, SIGTERM, SIGHUP: ask the session to stop, and count them. The handler never
    raises: a KeyboardInterrupt inside Thread.join leaves the thread looking finished
    (Python 3.11), and the tool would exit 0 while its session still runs."""

    def __init__(self, stop: Callable[[], object]) -> None:
        self.stop = stop
        self.count = 0
        self.hurried_at: float | None = None
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._handler)

    def _handler(self, signum: int, _frame: object) -> None:
        self.count += 1
        if self.count == 2:
            self.hurried_at = time.monotonic()
            try:
                print(f"{PROG}: stopping: the current window ends, then the server stops "
                      f"(at most {HARD_STOP_S:.0f} s)", file=sys.stderr, flush=True)
            except (OSError, ValueError):  # a closed terminal (SIGHUP)
                pass
        self.stop()

    def given_up(self) -> bool:
        return self.hurried_at is not None and time.monotonic() - self.hurried_at > HARD_STOP_S


def interrupt_on_term() -> None:
    """SIGTERM and SIGHUP end a command as Ctrl-C does: its half-written file removed, exit 130."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
