"""What a recording says, in one pass: the sweep's levels (with the GPU utilization and host
CPU measured while each ran), the probe's results, per-GPU telemetry and a GPU timeline.

Telemetry rows are aggregated from their JSON (not decoded into dataclasses): an hour of 8-GPU
samples at 1 Hz is 3600 rows, and the summary must come back in well under a second.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from statistics import fmean
from typing import TYPE_CHECKING, Any

from engine.events import AllReduceResult, LevelResult, ProbeResult, SweepFinished, Topology

if TYPE_CHECKING:
    from engine.record.reader import Recording

TIMELINE_POINTS = 600  # per GPU: enough for a chart, small enough for an HTML file
_DECODED_KINDS = ("level_result", "sweep_finished", "probe_result", "allreduce_result", "topology")


@dataclass
class GpuSummary:
    uuid: str
    index: int | None
    name: str | None
    source: str
    samples: int = 0
    util_mean: float | None = None
    util_max: float | None = None
    mem_used_max: int | None = None
    mem_total: int | None = None
    power_mean: float | None = None
    power_max: float | None = None


@dataclass
class LevelSummary:
    result: LevelResult
    t_start: float | None  # the measured span: non-warmup windows (or the level's own span)
    t_end: float | None
    gpu_util: dict[str, float] = field(default_factory=dict)  # uuid -> mean util % in the span
    gpu_power_w: dict[str, float] = field(default_factory=dict)  # uuid -> mean power in the span
    gpu_mem_used_max: dict[str, int] = field(default_factory=dict)  # uuid -> bytes, max in the span
    gpu_mem_total: dict[str, int] = field(default_factory=dict)
    host_cpu_percent: float | None = None
    windows_recorded: int = 0

    @property
    def level(self) -> float:
        return self.result.level

    @property
    def gpu_util_mean(self) -> float | None:
        return fmean(self.gpu_util.values()) if self.gpu_util else None


@dataclass
class RecordingSummary:
    path: str
    metadata: dict[str, Any]
    profile_name: str
    mode: str | None
    gpu_model: str
    gpu_count: int  # GPUs in the box (profile)
    config_variant: str  # the model config variant served: "1x", "4x", "cpu", ...
    gpus_in_config: int | None  # N for scaling: GPUs the config spreads instances over
    model: str | None
    weights: str | None
    batch_size: int | None
    load_mode: str | None
    levels_planned: list[float]
    cost_per_hour: float | None
    status: str | None
    exit_code: int | None
    error: str | None
    first_ts: float | None
    last_ts: float | None
    levels: list[LevelSummary]
    sweep: SweepFinished | None
    probe: list[ProbeResult]
    allreduce: list[AllReduceResult]
    topology: Topology | None
    gpus: list[GpuSummary]
    gpu_timeline: list[tuple[float, dict[str, float]]]  # (seconds from start, uuid -> util %)
    host_cpu_mean: float | None
    host_cpu_max: float | None
    warnings: list[str]
    errors: list[str]
    event_counts: dict[str, int]
    unknown_events: int
    versions: dict[str, Any]
    host: dict[str, Any]
    server: dict[str, Any]
    model_config: dict[str, Any]

    @property
    def duration_s(self) -> float:
        if self.first_ts is None or self.last_ts is None:
            return 0.0
        return self.last_ts - self.first_ts

    @property
    def random_weights(self) -> bool:
        return not self.weights

    @property
    def label(self) -> str:
        n = self.gpus_in_config
        gpus = f"{n}x {self.gpu_model}" if n else (self.config_variant or "cpu")
        return f"{gpus} ({self.profile_name})"


def gpus_in_variant(variant: str, gpu_count: int) -> int | None:
    """"4x" -> 4. Without an "Nx" variant: the box's GPU count, or None on a CPU-only run."""
    if variant.endswith("x") and variant[:-1].isdigit() and int(variant[:-1]) > 0:
        return int(variant[:-1])
    return gpu_count if gpu_count > 0 else None


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def _means(by_gpu: dict[str, list[float]]) -> dict[str, float]:
    return {uuid: fmean(v) for uuid, v in by_gpu.items() if v}


def _maxes(by_gpu: dict[str, list[Any]]) -> dict[str, Any]:
    return {uuid: max(v) for uuid, v in by_gpu.items() if v}


class _Span:
    """Sorted, non-overlapping level spans; maps an instant to the level running then."""

    def __init__(self, spans: dict[int, tuple[float, float]]) -> None:
        ordered = sorted((s, e, i) for i, (s, e) in spans.items() if e >= s)
        self._starts = [s for s, _e, _i in ordered]
        self._spans = ordered

    def index_at(self, ts: float) -> int | None:
        pos = bisect.bisect_right(self._starts, ts) - 1
        if pos < 0:
            return None
        start, end, index = self._spans[pos]
        return index if start <= ts <= end else None


def summarize(recording: Recording) -> RecordingSummary:
    meta = recording.metadata
    profile = meta.get("profile") or {}
    hardware = profile.get("hardware") or {}
    load = profile.get("load") or {}
    model_section = profile.get("model") or {}
    server = meta.get("server") or {}

    results: dict[int, LevelResult] = {}
    level_open: dict[int, float] = {}
    windows: dict[int, list[tuple[float, float]]] = {}
    window_counts: dict[int, int] = {}
    sweep: SweepFinished | None = None
    probe: list[ProbeResult] = []
    allreduce: list[AllReduceResult] = []
    topology: Topology | None = None
    gpu_rows: list[tuple[float, list[dict[str, Any]]]] = []
    host_rows: list[tuple[float, float]] = []
    warnings: dict[str, str] = {}
    errors: list[str] = []
    first_ts = last_ts = None
    ended: dict[str, Any] = {}
    current = -1

    for seq, ts, kind, data in recording.rows():
        first_ts = ts if first_ts is None else min(first_ts, ts)
        last_ts = ts if last_ts is None else max(last_ts, ts)
        if kind == "gpu_sample":
            gpu_rows.append((ts, data.get("gpus") or []))
        elif kind == "host_sample":
            if isinstance(data.get("cpu_percent"), (int, float)):
                host_rows.append((ts, float(data["cpu_percent"])))
        elif kind == "window":
            window_counts[current] = window_counts.get(current, 0) + 1
            if not data.get("warmup"):
                windows.setdefault(current, []).append((data["t_start"], data["t_end"]))
        elif kind == "level_started":
            current = int(data["index"])
            level_open[current] = ts
        elif kind in _DECODED_KINDS:
            event = recording.decode(seq, data)
            if isinstance(event, LevelResult):
                results[event.index] = event
            elif isinstance(event, SweepFinished):
                sweep = event
            elif isinstance(event, ProbeResult):
                probe.append(event)
            elif isinstance(event, AllReduceResult):
                allreduce.append(event)
            elif isinstance(event, Topology):
                topology = event
        elif kind == "warning":
            warnings.setdefault(data.get("key") or data.get("message", ""), f"{data.get('source')}: {data.get('message')}")
        elif kind == "error":
            errors.append(f"{data.get('source')}: {data.get('message')}")
        elif kind == "session_ended":
            ended = data
        elif kind not in ("session_started", "server_ready", "server_stopped", "phase"):
            recording.decode(seq, data)  # counts kinds this version does not know

    # The measured span of each level: its non-warmup windows, else start..result.
    spans: dict[int, tuple[float, float]] = {}
    for index, result in results.items():
        if windows.get(index):
            spans[index] = (min(s for s, _ in windows[index]), max(e for _, e in windows[index]))
        elif index in level_open:
            spans[index] = (level_open[index], result.ts)
    locate = _Span(spans)

    gpus, level_gpu, timeline = _gpu_aggregates(gpu_rows, locate, first_ts)
    level_host: dict[int, list[float]] = {}
    for ts, cpu in host_rows:
        index = locate.index_at(ts)
        if index is not None:
            level_host.setdefault(index, []).append(cpu)

    levels = [
        LevelSummary(
            result=result,
            t_start=spans.get(index, (None, None))[0],
            t_end=spans.get(index, (None, None))[1],
            gpu_util=_means(level_gpu.get(index, {}).get("util", {})),
            gpu_power_w=_means(level_gpu.get(index, {}).get("power", {})),
            gpu_mem_used_max=_maxes(level_gpu.get(index, {}).get("mem", {})),
            gpu_mem_total=_maxes(level_gpu.get(index, {}).get("total", {})),
            host_cpu_percent=_mean(level_host.get(index, [])),
            windows_recorded=window_counts.get(index, 0),
        )
        for index, result in results.items()
    ]
    levels.sort(key=lambda s: (s.result.level, s.result.index))

    variant = str(server.get("config_variant") or model_section.get("variant") or "")
    gpu_count = int(hardware.get("gpu_count") or 0)
    cost = hardware.get("cost_per_hour")
    planned = load.get("rates") if load.get("mode") == "rate" else load.get("concurrency")
    host_cpu = [c for _t, c in host_rows]
    return RecordingSummary(
        path=str(recording.path),
        metadata=meta,
        profile_name=str(meta.get("profile_name") or profile.get("name") or recording.path.stem),
        mode=meta.get("mode"),
        gpu_model=str(hardware.get("gpu_model") or "none"),
        gpu_count=gpu_count,
        config_variant=variant,
        gpus_in_config=gpus_in_variant(variant, gpu_count),
        model=server.get("model") or model_section.get("name"),
        weights=model_section.get("weights"),
        batch_size=load.get("batch_size"),
        load_mode=load.get("mode"),
        levels_planned=[float(x) for x in planned or []],
        cost_per_hour=float(cost) if isinstance(cost, (int, float)) and cost > 0 else None,
        status=ended.get("status") or meta.get("status"),
        exit_code=ended.get("exit_code", meta.get("exit_code")),
        error=ended.get("error"),
        first_ts=first_ts,
        last_ts=last_ts,
        levels=levels,
        sweep=sweep,
        probe=probe,
        allreduce=allreduce,
        topology=topology,
        gpus=gpus,
        gpu_timeline=timeline,
        host_cpu_mean=_mean(host_cpu),
        host_cpu_max=max(host_cpu) if host_cpu else None,
        warnings=list(warnings.values()),
        errors=errors,
        event_counts=recording.event_counts(),
        unknown_events=recording.unknown_events,
        versions=dict(meta.get("versions") or {}),
        host=dict(meta.get("host") or {}),
        server=dict(server),
        model_config=dict(meta.get("model_config") or {}),
    )


def _gpu_aggregates(
    rows: list[tuple[float, list[dict[str, Any]]]], locate: _Span, t0: float | None
) -> tuple[list[GpuSummary], dict[int, dict[str, dict[str, list[Any]]]], list[tuple[float, dict[str, float]]]]:
    per_gpu: dict[str, GpuSummary] = {}
    utils: dict[str, list[float]] = {}
    powers: dict[str, list[float]] = {}
    per_level: dict[int, dict[str, dict[str, list[Any]]]] = {}  # index -> metric -> uuid -> values
    for ts, readings in rows:
        index = locate.index_at(ts)
        for r in readings:
            uuid = str(r.get("uuid"))
            g = per_gpu.get(uuid)
            if g is None:
                g = per_gpu[uuid] = GpuSummary(uuid=uuid, index=r.get("index"), name=r.get("name"), source=str(r.get("source")))
            g.samples += 1
            util, mem, total, power = r.get("util_gpu"), r.get("mem_used"), r.get("mem_total"), r.get("power_w")
            if util is not None:
                utils.setdefault(uuid, []).append(util)
            if index is not None:
                slot = per_level.setdefault(index, {})
                for metric, value in (("util", util), ("power", power), ("mem", mem), ("total", total)):
                    if value is not None:
                        slot.setdefault(metric, {}).setdefault(uuid, []).append(value)
            if mem is not None:
                g.mem_used_max = mem if g.mem_used_max is None else max(g.mem_used_max, mem)
            if total is not None:
                g.mem_total = total
            if power is not None:
                powers.setdefault(uuid, []).append(power)
            if g.name is None and r.get("name"):
                g.name = r.get("name")
    for uuid, g in per_gpu.items():
        if utils.get(uuid):
            g.util_mean, g.util_max = fmean(utils[uuid]), max(utils[uuid])
        if powers.get(uuid):
            g.power_mean, g.power_max = fmean(powers[uuid]), max(powers[uuid])
    gpus = sorted(per_gpu.values(), key=lambda g: (g.index is None, g.index if g.index is not None else 0, g.uuid))
    return gpus, per_level, _timeline(rows, t0)


def _timeline(rows: list[tuple[float, list[dict[str, Any]]]], t0: float | None) -> list[tuple[float, dict[str, float]]]:
    """GPU utilization over time, averaged into at most TIMELINE_POINTS buckets."""
    if not rows or t0 is None:
        return []
    t_last = rows[-1][0]
    width = max((t_last - t0) / TIMELINE_POINTS, 1e-9)
    buckets: dict[int, tuple[list[float], dict[str, list[float]]]] = {}
    for ts, readings in rows:
        b = min(int((ts - t0) / width), TIMELINE_POINTS - 1)
        times, slot = buckets.setdefault(b, ([], {}))
        times.append(ts - t0)
        for r in readings:
            if r.get("util_gpu") is not None:
                slot.setdefault(str(r.get("uuid")), []).append(r["util_gpu"])
    return [
        (fmean(times), {uuid: fmean(v) for uuid, v in slot.items()})
        for _b, (times, slot) in sorted(buckets.items())
        if slot
    ]
