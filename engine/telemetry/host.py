"""Host CPU, memory and network, and the CPU that this tool's own processes use.

``own_cpu_percent`` feeds the load engine's self-audit ("is the client the limit?"): the
session process and its descendants (load workers), minus the subtree of an embedded
tritonserver, which is the thing being measured, not the measuring tool. 100 = one core.

CPU percentages come from our own deltas of psutil.cpu_times, not from psutil.cpu_percent:
that function keeps one module-wide baseline, so any other caller in the process would
silently shorten our interval.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import psutil

from engine.events import HostSample
from engine.telemetry.rates import CounterRate

DEFAULT_EXCLUDED = ("tritonserver",)


def cpu_busy_percent(before: Any, after: Any) -> float | None:
    """Busy share between two psutil cpu_times snapshots, in percent (0-100)."""

    def split(t: Any) -> tuple[float, float]:
        values = t._asdict()
        total = sum(values.values())
        # Linux counts guest time inside user/nice already
        total -= values.get("guest", 0.0) + values.get("guest_nice", 0.0)
        idle = values.get("idle", 0.0) + values.get("iowait", 0.0)
        return total, total - idle

    total0, busy0 = split(before)
    total1, busy1 = split(after)
    if total1 - total0 <= 0:
        return None
    return min(100.0, max(0.0, (busy1 - busy0) / (total1 - total0) * 100.0))


class OwnProcesses:
    """CPU of a process tree from cpu_times deltas, keyed by (pid, create time) so that a
    reused pid is never mistaken for the old process."""

    def __init__(self, root_pid: int | None = None, excluded_names: Iterable[str] = DEFAULT_EXCLUDED) -> None:
        self.root_pid = root_pid if root_pid is not None else os.getpid()
        self.excluded = set(excluded_names)
        self._tracked: dict[tuple[int, float], float] = {}
        self._last_t: float | None = None

    def _tree(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.root_pid)
            children = root.children(recursive=True)  # one scan of the process table
        except psutil.Error:
            return []
        by_pid = {p.pid: p for p in children}
        skip: dict[int, bool] = {self.root_pid: False}

        def excluded(p: psutil.Process) -> bool:
            if p.pid in skip:
                return skip[p.pid]
            try:
                result = p.name() in self.excluded
                if not result:
                    parent = by_pid.get(p.ppid())
                    result = excluded(parent) if parent is not None else False
            except psutil.Error:
                result = True  # gone: nothing to count
            skip[p.pid] = result
            return result

        return [root] + [p for p in children if not excluded(p)]

    def sample(self, t: float) -> float | None:
        """Percent of one core used by the tree since the previous call (None the first time)."""
        current: dict[tuple[int, float], float] = {}
        for proc in self._tree():
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    current[(proc.pid, proc.create_time())] = times.user + times.system
            except psutil.Error:
                continue
        last_t, self._last_t = self._last_t, t
        previous, self._tracked = self._tracked, current
        if last_t is None or t <= last_t:
            return None
        used = 0.0
        for key, cpu_s in current.items():
            if key in previous:
                used += max(0.0, cpu_s - previous[key])
            elif key[1] >= last_t:
                used += cpu_s  # born during this interval: all of its CPU belongs here
        # processes that ended during the interval take their last slice with them
        return used / (t - last_t) * 100.0


class HostReader:
    def __init__(self, root_pid: int | None = None, excluded_names: Iterable[str] = DEFAULT_EXCLUDED) -> None:
        self._own = OwnProcesses(root_pid, excluded_names)
        self._cpu_total: Any = None
        self._cpu_cores: list[Any] | None = None
        self._net_tx = CounterRate()
        self._net_rx = CounterRate()

    def read(self, ts: float) -> HostSample:
        """A HostSample over the interval since the previous call. The first call only sets
        baselines: its rates and percentages are None."""
        total = psutil.cpu_times()
        cores = psutil.cpu_times(percpu=True)
        cpu_percent = cpu_busy_percent(self._cpu_total, total) if self._cpu_total is not None else None
        per_core: list[float] = []
        if self._cpu_cores is not None and len(self._cpu_cores) == len(cores):
            values = [cpu_busy_percent(a, b) for a, b in zip(self._cpu_cores, cores, strict=True)]
            per_core = [v for v in values if v is not None] if None not in values else []
        self._cpu_total, self._cpu_cores = total, cores

        mem = psutil.virtual_memory()
        tx = rx = 0
        for nic, counters in psutil.net_io_counters(pernic=True).items():
            if nic == "lo" or nic.startswith("lo"):  # loopback is not the network
                continue
            tx += counters.bytes_sent
            rx += counters.bytes_recv
        return HostSample(
            cpu_percent=cpu_percent,
            per_core=per_core,
            mem_used=int(mem.total - mem.available),  # what applications hold; cache can be reclaimed
            mem_total=int(mem.total),
            own_cpu_percent=self._own.sample(ts),
            net_tx_bps=self._net_tx.update(tx, ts),
            net_rx_bps=self._net_rx.update(rx, ts),
            ts=ts,
        )
