"""How much CPU a load client got, and how long it waited for it (Linux /proc/<pid>/task/*/schedstat).

schedstat gives per thread: nanoseconds on a CPU, nanoseconds runnable but waiting in a run
queue, and timeslices. The wait time is the direct measure of "the client was ready to handle
a response but the machine gave its CPU to someone else" — on a small shared box it decides
latency as much as the client's own efficiency does. Sampled from a thread while the tool runs
(the processes are gone when it ends); each thread's counters only grow, so the last sample of
each thread is its total.
"""

from __future__ import annotations

import threading
from pathlib import Path

import psutil


class SchedWatcher:
    def __init__(self, match: str, interval_s: float = 0.2) -> None:
        self.match = match  # substring of the command line of the client's processes
        self.interval_s = interval_s
        self.latest: dict[int, tuple[int, int, int]] = {}  # tid -> (run_ns, wait_ns, slices)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> SchedWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _loop(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            for proc in me.children(recursive=True):
                try:
                    if self.match not in " ".join(proc.cmdline()):
                        continue
                except psutil.Error:
                    continue
                for task in Path(f"/proc/{proc.pid}/task").glob("*"):
                    try:
                        run, wait, slices = (int(x) for x in (task / "schedstat").read_text().split()[:3])
                    except (OSError, ValueError):
                        continue
                    self.latest[int(task.name)] = (run, wait, slices)
            self._stop.wait(self.interval_s)

    @property
    def run_s(self) -> float:
        return sum(v[0] for v in self.latest.values()) / 1e9

    @property
    def wait_s(self) -> float:
        return sum(v[1] for v in self.latest.values()) / 1e9

    @property
    def threads(self) -> int:
        return len(self.latest)
