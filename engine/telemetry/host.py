"""Host CPU, memory and network, and the CPU that this tool's own processes use.

``own_cpu_percent`` feeds the load engine's self-audit ("is the client the limit?"): the
session process and its descendants (load workers), minus the subtree of an embedded
tritonserver, which is the thing being measured, not the measuring tool. 100 = one core.
``server_cpu_percent`` is that subtree's (the server and its backend stubs), so that a host
out of CPU can be split between the server, us and everything else.

CPU percentages come from our own deltas of psutil.cpu_times, not from psutil.cpu_percent:
that function keeps one module-wide baseline, so any other caller in the process would
silently shorten our interval.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

import psutil

from engine.events import HostSample
from engine.telemetry.rates import CounterRate

DEFAULT_EXCLUDED = ("tritonserver",)
LISTENER_LOOKUP_S = 30.0  # a server not found by its port is looked for again this often


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


def split_tree(parents: dict[int, int], names: dict[int, str], root_pid: int,
               server_names: Iterable[str]) -> tuple[set[int], set[int]]:
    """A process table (pid -> parent pid, pid -> name) of ``root_pid``'s descendants split
    into ours (the root and its descendants) and the server's (a process named in
    ``server_names`` and all below it: an embedded tritonserver and its backend stubs)."""
    wanted = set(server_names)
    server: dict[int, bool] = {root_pid: False}

    def in_server(pid: int) -> bool:
        if pid not in server:
            parent = parents.get(pid)
            server[pid] = names.get(pid) in wanted or (parent is not None and parent in parents and in_server(parent))
        return server[pid]

    theirs = {pid for pid in parents if in_server(pid)}
    return {root_pid} | (set(parents) - theirs), theirs


class _CpuDelta:
    """CPU of a changing set of processes between calls, keyed by (pid, create time) so that a
    reused pid is never mistaken for the old process."""

    def __init__(self) -> None:
        self._tracked: dict[tuple[int, float], float] = {}

    def update(self, procs: Iterable[psutil.Process], last_t: float | None, t: float) -> float | None:
        current: dict[tuple[int, float], float] = {}
        for proc in procs:
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    current[(proc.pid, proc.create_time())] = times.user + times.system
            except psutil.Error:
                continue
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


class OwnProcesses:
    """CPU of our process tree, and apart from it of the server's subtree inside it (an
    embedded tritonserver and its children), from cpu_times deltas."""

    def __init__(self, root_pid: int | None = None, excluded_names: Iterable[str] = DEFAULT_EXCLUDED,
                 server_port: int | None = None) -> None:
        self.root_pid = root_pid if root_pid is not None else os.getpid()
        self.excluded = set(excluded_names)
        self.server_port = server_port  # a server on this machine that is not ours: found by its port
        self._server_pid: int | None = None
        self._next_lookup = 0.0
        self._ours = _CpuDelta()
        self._server = _CpuDelta()
        self._last_t: float | None = None
        self.server_percent: float | None = None  # the server subtree at the last sample; None: none in our tree

    def _split(self) -> tuple[list[psutil.Process], list[psutil.Process]]:
        try:
            root = psutil.Process(self.root_pid)
            children = root.children(recursive=True)  # one scan of the process table
        except psutil.Error:
            return [], []
        parents: dict[int, int] = {}
        names: dict[int, str] = {}
        for p in children:
            try:
                parents[p.pid], names[p.pid] = p.ppid(), p.name()
            except psutil.Error:
                continue  # gone: nothing to count
        ours, server = split_tree(parents, names, self.root_pid, self.excluded)
        by_pid = {p.pid: p for p in children}
        theirs = [by_pid[pid] for pid in server if pid in by_pid]
        if not theirs and self.server_port:
            theirs = self._listener_tree()
        return [root] + [by_pid[pid] for pid in ours if pid in by_pid], theirs

    def _listener_tree(self) -> list[psutil.Process]:
        """The process listening on ``server_port`` (a remote-mode server on this machine) and
        all below it (its backend stubs); looked up again when it is gone."""
        from engine.http_threads import listener_pid

        for _attempt in range(2):
            if self._server_pid is None:
                now = time.monotonic()
                if now < self._next_lookup:  # a scan of every process's fds: not each sample
                    return []
                self._next_lookup = now + LISTENER_LOOKUP_S
                self._server_pid = listener_pid(self.server_port) if self.server_port else None
                if self._server_pid is None:
                    return []
            try:
                proc = psutil.Process(self._server_pid)
                return [proc, *proc.children(recursive=True)]
            except psutil.Error:
                self._server_pid = None  # restarted: find it again
        return []

    def _tree(self) -> list[psutil.Process]:
        return self._split()[0]

    def sample(self, t: float) -> float | None:
        """Percent of one core used by our tree since the previous call (None the first time);
        ``server_percent`` gets the server subtree's over the same interval."""
        ours, server = self._split()
        last_t, self._last_t = self._last_t, t
        own = self._ours.update(ours, last_t, t)
        server_cpu = self._server.update(server, last_t, t)
        self.server_percent = server_cpu if server else None
        return own


def loopback_port(url: str | None) -> int | None:
    """The port of a URL on this machine (localhost or a loopback address); None otherwise."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(str(url or ""))
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return None
    if port is None:
        return None
    if host == "localhost":
        return port
    try:
        return port if ipaddress.ip_address(host).is_loopback else None
    except ValueError:
        return None


class HostReader:
    def __init__(self, root_pid: int | None = None, excluded_names: Iterable[str] = DEFAULT_EXCLUDED,
                 server_port: int | None = None) -> None:
        self._own = OwnProcesses(root_pid, excluded_names, server_port)
        self._cpu_total: Any = None
        self._cpu_cores: list[Any] | None = None
        self._net_tx = CounterRate()
        self._net_rx = CounterRate()
        self._last_ts: float | None = None

    def read(self, ts: float) -> HostSample:
        """A HostSample over the interval since the previous call. The first call only sets
        baselines: its rates and percentages are None."""
        total = psutil.cpu_times()
        cores = psutil.cpu_times(percpu=True)
        cpu_percent = cpu_busy_percent(self._cpu_total, total) if self._cpu_total is not None else None
        per_core: list[float | None] = []
        if self._cpu_cores is not None and len(self._cpu_cores) == len(cores):
            values = [cpu_busy_percent(a, b) for a, b in zip(self._cpu_cores, cores, strict=True)]
            per_core = [v for v in values if v is not None] if None not in values else []
        self._cpu_total, self._cpu_cores = total, cores
        interval = ts - self._last_ts if self._last_ts is not None else None
        self._last_ts = ts

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
            server_cpu_percent=self._own.server_percent,
            net_tx_bps=self._net_tx.update(tx, ts),
            net_rx_bps=self._net_rx.update(rx, ts),
            interval_s=interval,
            ts=ts,
        )
