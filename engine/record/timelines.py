"""A recording over time, for the report's time-axis charts: each window's throughput and
latency, where each level (and each sweep) began, and each GPU's utilization, power and memory.

Long recordings are put in at most ``points`` time buckets: a bucket's throughput, p50,
utilization and power are means, its p99 and memory the highest (a tail or a peak is never
averaged away)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine import format as fmt
from engine.record.gpu_fields import FIELDS, column_or_null
from engine.record.summary import RecordedEvents

POINTS = 300


@dataclass
class WindowPoint:
    t: float  # seconds from the recording's first event (the window's end)
    throughput_ips: float
    p50: float | None  # seconds
    p99: float | None
    warmup: bool


@dataclass
class Boundary:
    t: float  # seconds from the start
    label: str  # the level ("8", "12.5/s"); a new sweep's first level reads "sweep 2: 1"


@dataclass
class GpuTrace:
    label: str  # "GPU 0"
    util: list[tuple[float, float]] = field(default_factory=list)  # (t, percent)
    power: list[tuple[float, float]] = field(default_factory=list)  # (t, watts)
    mem: list[tuple[float, float]] = field(default_factory=list)  # (t, bytes)


@dataclass
class Timelines:
    windows: list[WindowPoint]
    boundaries: list[Boundary]
    gpus: list[GpuTrace]
    bucketed: bool = False  # windows were merged into time buckets (a long recording)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_timelines(recording: RecordedEvents, points: int = POINTS) -> Timelines:
    t0 = next(recording.query("SELECT ts FROM events ORDER BY seq LIMIT 1"), (None,))[0]
    if t0 is None:
        return Timelines([], [], [])
    windows: list[WindowPoint] = []
    boundaries: list[Boundary] = []
    sweep = 0
    for _seq, ts, kind, data in recording.rows(kinds=("window", "level_started")):
        if kind == "level_started":
            level = _number(data.get("level"))
            if level is None:
                continue
            sweep += data.get("index") == 0 or sweep == 0
            text = fmt.level(str(data.get("mode") or "concurrency"), level)
            boundaries.append(Boundary(ts - t0, f"sweep {sweep}: {text}" if sweep > 1 and data.get("index") == 0 else text))
            continue
        ips, end = _number(data.get("throughput_ips")), _number(data.get("t_end"))
        found = data.get("latency")
        latency: dict = found if isinstance(found, dict) else {}
        if ips is None or end is None:
            continue
        windows.append(WindowPoint(end - t0, ips, _number(latency.get("p50")), _number(latency.get("p99")),
                                   bool(data.get("warmup"))))
    bucketed = len(windows) > points
    if bucketed:
        windows = _buckets(windows, points)
    return Timelines(windows, boundaries, _gpu_traces(recording, t0, points), bucketed)


def _buckets(windows: list[WindowPoint], points: int) -> list[WindowPoint]:
    span = max(windows[-1].t - windows[0].t, 1e-9)
    groups: dict[int, list[WindowPoint]] = {}
    for w in windows:
        groups.setdefault(min(int((w.t - windows[0].t) / span * points), points - 1), []).append(w)
    out = []
    for group in (groups[k] for k in sorted(groups)):
        p50s = [w.p50 for w in group if w.p50 is not None]
        p99s = [w.p99 for w in group if w.p99 is not None]
        out.append(WindowPoint(sum(w.t for w in group) / len(group), sum(w.throughput_ips for w in group) / len(group),
                               sum(p50s) / len(p50s) if p50s else None, max(p99s) if p99s else None,
                               all(w.warmup for w in group)))
    return out


def _gpu_traces(recording: RecordedEvents, t0: float, points: int) -> list[GpuTrace]:
    present = frozenset(name for _cid, name, *_rest in recording.query("PRAGMA table_info(gpu_samples)"))
    by_name = {f.reading: f for f in FIELDS if f.derive is None}
    util, power, mem = (column_or_null(by_name[n], present) for n in ("util_gpu", "power_w", "mem_used"))
    t_last = next(recording.query("SELECT max(ts) FROM gpu_samples"), (None,))[0]
    if t_last is None:
        return []
    width = max((t_last - t0) / points, 1e-9)
    gpus = {gid: GpuTrace(f"GPU {idx}" if idx is not None else f"GPU {str(uuid)[:8]}")
            for gid, uuid, idx in recording.query("SELECT id, uuid, idx FROM gpus ORDER BY idx, uuid")}
    for gid, t, u, p, m in recording.query(
        f"SELECT gpu, avg(ts - ?), avg({util}), avg({power}), max({mem}) FROM gpu_samples "
        "GROUP BY gpu, min(CAST((ts - ?) / ? AS INTEGER), ?) ORDER BY 2",
        (t0, t0, width, points - 1),
    ):
        trace = gpus.get(gid)
        if trace is None:
            continue
        for series, value in ((trace.util, u), (trace.power, p), (trace.mem, m)):
            if value is not None:
                series.append((t, float(value)))
    return [g for g in gpus.values() if g.util or g.power or g.mem]
