"""The CLI as the tests run it: in a subprocess (the real entry point: `python -m tui.cli`, its
imports, its exit code), or in this process (`tui.cli.main`) for the cases that fail on bad input
before any real work starts, a few milliseconds instead of a fresh interpreter's second.

Both answer a `subprocess.CompletedProcess[str]` (returncode, stdout, stderr), so one assertion
reads either. In-process, an exception escaping main() is what a traceback is in a subprocess: it
is not caught here, so the test fails with it. What main() may change for the whole process is put
back (the signal handlers its stop signals install, the environment, the working directory, the
root logger's handlers). A command that starts a thread or a child process (a session, a server,
load workers, a replay), or imports torch or textual, fails the test: it belongs in a subprocess.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
_SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if hasattr(signal, s.name))


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m tui.cli ARGS` in a fresh process, from the repository's root."""
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def exit_code(exc: SystemExit) -> int:
    """The exit code python gives a SystemExit: None is 0; any other non-int is printed to stderr
    (sys.exit("message")) and is 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


HEAVY = ("torch", "textual")  # seconds to import, and there for the rest of the test process


@contextlib.contextmanager
def _threads_started() -> Iterator[list[str]]:
    """The names of the threads this thread starts inside the block (a command's first thread is
    started by the thread that runs it; a thread another test left running is not counted)."""
    started: list[str] = []
    start = threading.Thread.start
    caller = threading.current_thread()

    def counted(self: threading.Thread) -> None:
        if threading.current_thread() is caller:
            started.append(self.name)
        start(self)

    threading.Thread.start = counted  # type: ignore[method-assign]
    try:
        yield started
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]


def run_cli_inproc(*args: str) -> subprocess.CompletedProcess[str]:
    """`tui.cli.main(ARGS)` in this process, its stdout and stderr captured: the exit code it returns
    or argparse's SystemExit carries. Only for commands that end before any server, load worker,
    TUI or session starts."""
    from tui.cli import main

    handlers = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    environ = dict(os.environ)
    cwd = os.getcwd()
    root_logger = logging.getLogger()
    log_handlers, log_level = list(root_logger.handlers), root_logger.level
    heavy = [m for m in HEAVY if m not in sys.modules]
    me = psutil.Process()
    children = {p.pid for p in me.children(recursive=True)}
    out, err = io.StringIO(), io.StringIO()
    try:
        os.chdir(ROOT)  # as run_cli's subprocess: relative paths and the profiles folder resolve alike
        if not os.environ.get("COLUMNS"):  # argparse wraps help as in a subprocess whose stdout is a pipe
            os.environ["COLUMNS"] = "80"
        with _threads_started() as threads, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's --help, --version and usage errors
                code = exit_code(exc)
    finally:
        for sig, handler in handlers.items():
            if signal.getsignal(sig) is not handler and handler is not None:
                signal.signal(sig, handler)
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        os.chdir(cwd)
        root_logger.handlers[:] = log_handlers
        root_logger.setLevel(log_level)
    assert not threads, f"main{args} started threads {threads}: run it in a subprocess"
    imported = [m for m in heavy if m in sys.modules]
    assert not imported, f"main{args} imported {imported}: run it in a subprocess"
    spawned = [p for p in me.children(recursive=True) if p.pid not in children]
    assert not spawned, f"main{args} started processes {spawned}: run it in a subprocess"
    return subprocess.CompletedProcess(["tui.cli.main", *args], code, out.getvalue(), err.getvalue())
