"""A short human summary of a telemetry run (the CLI's stderr): means and peaks per GPU and
for the host, the topology line and the warnings. Pure accumulation of events."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine import format as fmt
from engine.events import Event, GpuSample, HostSample, Topology, Warning


@dataclass
class Series:
    values: list[float] = field(default_factory=list)
    missing: int = 0  # samples where the source had no value

    def add(self, value: float | int | None) -> None:
        if value is None:
            self.missing += 1
        else:
            self.values.append(float(value))

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None

    @property
    def peak(self) -> float | None:
        return max(self.values) if self.values else None


GPU_FIELDS = (
    "util_gpu", "util_mem", "mem_used", "power_w", "temp_c", "sm_clock_mhz",
    "pcie_tx_bps", "pcie_rx_bps", "nvlink_tx_bps", "nvlink_rx_bps",
)
HOST_FIELDS = ("cpu_percent", "own_cpu_percent", "mem_used", "net_tx_bps", "net_rx_bps")


def _fmt(value: float | None, unit: str) -> str:
    """One figure with its unit, read as engine/format.py reads it everywhere else."""
    if unit == "B":
        return fmt.NA if value is None else f"{fmt.gib(value)} GiB"
    if unit == "B/s":
        return fmt.bytes_rate(value)
    if unit == "%":
        return fmt.percent_points(value)
    if unit == "% of a core":
        return fmt.NA if value is None else f"{fmt.percent_points(value)} of a core"
    if unit == " W":
        return fmt.watts(value)
    return fmt.NA if value is None else f"{value:.0f}{unit}"


_UNITS = {
    "util_gpu": "%", "util_mem": "%", "mem_used": "B", "power_w": " W", "temp_c": " C", "sm_clock_mhz": " MHz",
    "pcie_tx_bps": "B/s", "pcie_rx_bps": "B/s", "nvlink_tx_bps": "B/s", "nvlink_rx_bps": "B/s",
    "cpu_percent": "%", "own_cpu_percent": "% of a core",
    "net_tx_bps": "B/s", "net_rx_bps": "B/s",
}


class TelemetrySummary:
    def __init__(self) -> None:
        self.topology: Topology | None = None
        self.gpus: dict[tuple[str, str], dict[str, Series]] = {}  # (source, uuid) -> field -> series
        self.labels: dict[tuple[str, str], str] = {}
        self.intervals: dict[str, float] = {}
        self.processes: dict[tuple[str, str], set[str]] = {}
        self.host: dict[str, Series] = {f: Series() for f in HOST_FIELDS}
        self.host_samples = 0
        self.warnings: list[str] = []

    def add(self, event: Event) -> None:
        if isinstance(event, Topology):
            self.topology = event
        elif isinstance(event, GpuSample):
            self.intervals[event.source] = event.interval_s
            for r in event.gpus:
                key = (r.source, r.uuid)
                series = self.gpus.setdefault(key, {f: Series() for f in GPU_FIELDS})
                self.labels[key] = f"[{r.source}] GPU {r.index if r.index is not None else '?'} {r.name or ''} {r.uuid}"
                for f in GPU_FIELDS:
                    series[f].add(getattr(r, f))
                self.processes.setdefault(key, set()).update(
                    f"{p.get('name') or '?'}({p.get('pid')})" for p in r.processes
                )
        elif isinstance(event, HostSample):
            self.host_samples += 1
            for f in HOST_FIELDS:
                self.host[f].add(getattr(event, f))
        elif isinstance(event, Warning):
            self.warnings.append(event.message)

    def render(self) -> str:
        lines = ["-- telemetry summary (mean / peak over the run) --"]
        if self.topology is not None:
            lines.append(f"topology: {self.topology.summary}")
        for key, series in self.gpus.items():
            n = len(series["util_gpu"].values) + series["util_gpu"].missing
            lines.append(f"{self.labels[key]}  ({n} samples every {self.intervals.get(key[0], 0):g} s)")
            for f in GPU_FIELDS:
                s = series[f]
                if s.values or f in ("util_gpu", "mem_used", "power_w"):
                    lines.append(f"    {f:<14} {_fmt(s.mean, _UNITS[f]):>14} / {_fmt(s.peak, _UNITS[f]):>14}"
                                 + (f"   ({s.missing} not available)" if s.missing else ""))
            procs = sorted(self.processes.get(key, ()))
            if procs:
                lines.append(f"    processes      {', '.join(procs[:8])}" + (" ..." if len(procs) > 8 else ""))
        lines.append(f"host ({self.host_samples} samples)")
        for f in HOST_FIELDS:
            s = self.host[f]
            lines.append(f"    {f:<16} {_fmt(s.mean, _UNITS[f]):>14} / {_fmt(s.peak, _UNITS[f]):>14}")
        for message in self.warnings:
            lines.append(f"warning: {message}")
        return "\n".join(lines)
