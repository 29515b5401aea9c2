"""A session or a replay without the TUI: its events as progress lines, stopped by the stop
signals, and the exit code it ended with."""

from __future__ import annotations

import sys

from tui.commands.exits import PROG, shown
from tui.commands.stop_signals import StopSignals


def run_headless(session, *, replay: bool = False) -> int:  # noqa: ANN001 - a Session or a ReplaySource
    """``replay``: printing is the whole job, so a printer that failed fails the command."""
    from tui.headless import HeadlessPrinter

    printer = HeadlessPrinter()
    session.bus.subscribe(printer)
    signals = StopSignals(session.stop)
    session.start()
    while not session.join(0.5):
        if signals.given_up():  # the session did not end in time: never report it as done
            session.exit_code = 130
            break
    if replay and printer.failure is not None and session.exit_code == 0:
        session.exit_code = 2
    printer.finish(session.exit_code, getattr(session, "recording_path", None))
    error = getattr(session, "error", None)
    if session.exit_code == 2 and error:
        print(f"{PROG}: error: {shown(error.splitlines()[0])}", file=sys.stderr)
    elif session.exit_code == 1 and error:
        print(f"{PROG}: failed: {shown(error.splitlines()[0])}", file=sys.stderr)
    return session.exit_code
