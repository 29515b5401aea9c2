"""CPU hogs for the tests and the bench of contention (`python -m bench noise`): busy processes
that are not ours (each is started detached, so that it is no descendant of the process that
starts it: the tool counts its own process tree as its own), named ``cpuhog`` in the process
table. Stopped by pid, each one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HOG_NAME = "cpuhog"
_SPIN = "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); exec('while True: pass')"


@contextmanager
def cpu_hogs(count: int, folder: Path) -> Iterator[list[int]]:
    """``count`` spinning processes, detached; yields their pids once every one is running."""
    exe = folder / HOG_NAME
    if not exe.exists():
        exe.symlink_to(sys.executable)  # the process table names it after the file it runs
    pid_files = [folder / f"hog-{i}.pid" for i in range(count)]
    for f in pid_files:
        f.unlink(missing_ok=True)
        # setsid --fork: the hog's parent exits at once, so the hog is reparented away from us
        subprocess.run(["setsid", "--fork", str(exe), "-c", _SPIN, str(f)], check=True)
    pids: list[int] = []
    try:
        for f in pid_files:
            while not f.exists() or not f.read_text().strip():
                time.sleep(0.05)
            pids.append(int(f.read_text()))
        yield pids
    finally:
        for f in pid_files:  # also those whose pid arrived after a failure above
            if f.exists() and f.read_text().strip() and int(f.read_text()) not in pids:
                pids.append(int(f.read_text()))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
