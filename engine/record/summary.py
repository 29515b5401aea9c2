"""What a recording says, in one pass: the sweep's levels (with the GPU utilization and host
CPU measured while each ran), the probe's results, per-GPU telemetry and a GPU timeline.

Telemetry is aggregated by SQL over the recording's gpu_samples / host_samples tables (not by
parsing an hour of 8-GPU samples as JSON): the summary must come back in well under a second.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any, Protocol

from engine.analysis.answer import gpus_in_variant
from engine.analysis.gpu_sharing import GpuSharing
from engine.analysis.stream_split import split_applies, unsplit_level
from engine.errors import RecordingError
from engine.events import (
    AllReduceResult,
    BoxCheck,
    Event,
    LevelResult,
    NetworkPath,
    ProbeResult,
    SessionStatus,
    SweepFinished,
    Topology,
    WireCeiling,
)
from engine.modes import mode_of
from engine.profiles import recorded_profile, scale_out_parts
from engine.record.gpu_fields import FIELDS, TIMELINE, column_or_null


class RecordedEvents(Protocol):
    """What the summary reads of a recording (engine.record.reader.Recording): the summary does
    not import the reader, which imports the summary for ``Recording.summary()``."""

    @property
    def path(self) -> Path: ...

    @property
    def metadata(self) -> dict[str, Any]: ...

    @property
    def unknown_events(self) -> int: ...

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]: ...

    def rows(self, kinds: tuple[str, ...] | None = None, after_seq: int = 0,
             exclude: tuple[str, ...] = ()) -> Iterator[tuple[int, float, str, dict[str, Any]]]: ...

    def raw_rows(self, after_seq: int = 0, exclude: tuple[str, ...] = ()) -> Iterator[tuple[int, float, str, str]]: ...

    def parse(self, seq: int, kind: str, data: str | bytes) -> Any: ...

    def decode(self, seq: int, data: dict[str, Any] | str | bytes, kind: str = "") -> Event | None: ...

    def event_counts(self) -> dict[str, int]: ...


TIMELINE_POINTS = 600  # per GPU: enough for a chart, small enough for an HTML file
_TELEMETRY_KINDS = ("gpu_sample", "host_sample")  # summarised from their index tables
_DECODED_KINDS = ("level_result", "sweep_finished", "probe_result", "allreduce_result", "topology", "box_check",
                  "wire_ceiling")


@dataclass
class GpuSummary:
    uuid: str
    index: int | None
    name: str | None
    source: str
    samples: int = 0
    # "<column>_<aggregate>" -> value over the whole session, for each field of gpu_fields.FIELDS
    # ("util_mean", "power_max", ...); None where the GPU's source did not give it
    stats: dict[str, float | None] = field(default_factory=dict)


@dataclass
class LevelSummary:
    result: LevelResult
    sweep: int  # which sweep of the session (1, 2, ...): a session can run several; figures never mix
    t_start: float | None  # the measured span: non-warmup windows (or the level's own span)
    t_end: float | None
    # gpu_samples column -> uuid -> the field's in_level aggregate over the span (gpu_fields.FIELDS)
    gpu: dict[str, dict[str, float]] = field(default_factory=dict)
    host_cpu_percent: float | None = None
    windows_recorded: int = 0
    own_cpu_percent: float | None = None  # our processes in the span (100 = one core)
    server_cpu_percent: float | None = None  # the embedded server's processes; None: not recorded

    @property
    def level(self) -> float:
        return self.result.level

    @property
    def gpu_util(self) -> dict[str, float]:
        """uuid -> mean utilization % in the span."""
        return self.gpu.get("util", {})

    @property
    def gpu_util_mean(self) -> float | None:
        return fmean(self.gpu_util.values()) if self.gpu_util else None


@dataclass
class SweepRun:
    """One sweep of a session (a TUI user can run several): its number, the levels it planned
    and measured, and its SweepFinished if it got that far."""

    number: int
    planned: int
    measured: int = 0
    interrupted: bool = False
    finished: SweepFinished | None = None

    @property
    def complete(self) -> bool:
        return self.measured >= self.planned > 0 and not self.interrupted

    def describe(self, of: int) -> str:
        state = "complete" if self.complete else f"stopped after {self.measured} of {self.planned} levels"
        return f"sweep {self.number} of {of}, {state}"


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
    transport: str  # load.transport: how inputs reached the server (recordings made before it: http)
    # the embedded server on GPUs under MPS (True/False); None: remote, CPU, or recorded before
    mps: bool | None
    cost_per_hour: float | None
    status: SessionStatus | None  # None: not recorded (a session that never ended)
    exit_code: int | None
    error: str | None
    first_ts: float | None
    last_ts: float | None
    levels: list[LevelSummary]  # every sweep's, ordered by sweep then level
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
    box_check: BoxCheck | None = None  # the check at the session's start, where it ran
    sweeps: list[SweepRun] = field(default_factory=list)  # those that measured at least one level
    wires: dict[int, WireCeiling] = field(default_factory=dict)  # sweep number -> its wire check (--wire)
    # Python-backend stubs per GPU and whether an MPS server was there (NVML's process lists)
    gpu_sharing: list[GpuSharing] = field(default_factory=list)
    # probe.dataset_size, samples per epoch (the training bill); None: not set, or recorded before it
    dataset_size: int | None = None
    # the inputs sent: load.input_data's path, sha256, entries, requests, source, validated (the
    # InputDataUsed event); None: load.data's generated tensors (``data``)
    input_data: dict[str, Any] | None = None
    # load.slo: a streaming sweep's objectives ("ttft_p99=200ms,itl_p99=50ms"; "" none)
    stream_slo: str = ""
    data: str = "random"  # load.data

    @property
    def inputs_text(self) -> str:
        """What the requests carried, in a few words: the data file and its digest, or generated tensors."""
        d = self.input_data
        if not d:
            return "zeros" if self.data == "zeros" else "random tensors"
        entries = d.get("entries")
        checked = ", outputs checked against its validation_data" if d.get("validated") else ""
        return (f"{d.get('path')} ({entries} entr{'y' if entries == 1 else 'ies'}, sha256 {str(d.get('sha256'))[:12]}"
                f"{checked})")

    @property
    def inputs_key(self) -> str:
        """What two runs must share to have sent the same inputs: the data's digest, or load.data."""
        return f"sha256 {self.input_data.get('sha256')}" if self.input_data else self.data

    @property
    def main_sweep(self) -> int | None:
        """The sweep headline figures (peak, saturation, cost, verdict) come from: the last
        complete one, else the one that measured most (the later on a tie)."""
        complete = [s for s in self.sweeps if s.complete]
        if complete:
            return complete[-1].number
        best = max(reversed(self.sweeps), key=lambda s: s.measured, default=None)
        return best.number if best else None

    def levels_of(self, sweep: int | None) -> list[LevelSummary]:
        return [lv for lv in self.levels if lv.sweep == sweep]

    def network_path(self, sweep: int | None = None) -> NetworkPath | None:
        """The path to the server in a sweep (default the main one): of its levels' measurements,
        the one with the shortest round trip (the others waited for something besides the
        path); None where none was measured (a recording made before they were)."""
        paths = [lv.result.network for lv in self.levels_of(self.main_sweep if sweep is None else sweep)]
        measured = [p for p in paths if p is not None and p.rtt is not None]
        return min(measured, key=lambda p: p.rtt or 0.0, default=None)

    def sweep_run(self, number: int | None) -> SweepRun | None:
        return next((s for s in self.sweeps if s.number == number), None)

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
        if (parts := scale_out_parts(self.config_variant)) is not None:  # N servers stand for N boxes
            gpus = f"{parts[1]} x {parts[0]}" + (f" {self.gpu_model}" if parts[0] == "1x" else "")
        elif self.config_variant.startswith("tp"):  # a served LLM's config (study --serve)
            gpus = self.config_variant + (f" {self.gpu_model}" if self.gpu_count else "")
        else:
            gpus = f"{n}x {self.gpu_model}" if n else (self.config_variant or "cpu")
        return f"{gpus} ({self.profile_name})"


def _table(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: object) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _bad(recording: RecordedEvents, seq: int, kind: str, what: str) -> Exception:
    return RecordingError(f"{recording.path}: corrupt event #{seq} ({kind}): {what}")


_NUMERIC_TABLES = ("events", "gpu_samples", "host_samples")
MAX_TS = 1e11  # UNIX seconds: beyond the year 5000 a timestamp is a corrupt value, not a time


def check_numeric_tables(recording: RecordedEvents) -> None:
    """The telemetry tables and the events' timestamps hold numbers (SQL aggregates would
    otherwise mix text into the figures): a text, blob or infinite value there is a corrupt
    recording, one line."""
    for table in _NUMERIC_TABLES:  # one scan per table, not one per column
        columns = [row[1] for row in recording.query(f"PRAGMA table_info({table})")
                   if row[1] not in ("kind", "data", "uuid", "name", "source")]
        if not columns:
            continue
        limits = [MAX_TS if column == "ts" else 1e300 for column in columns]
        bad_value = [f"({c} IS NOT NULL AND (typeof({c}) NOT IN ('integer', 'real') OR abs({c}) > ?))" for c in columns]
        row = next(recording.query(
            f"SELECT seq, {', '.join(columns)} FROM {table} WHERE {' OR '.join(bad_value)} LIMIT 1",  # noqa: S608 - our own column names
            tuple(limits)), None)
        if row is None:
            continue
        for column, limit, value in zip(columns, limits, row[1:], strict=True):
            if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or abs(value) > limit):
                raise RecordingError(f"{recording.path}: corrupt {table} row (seq {row[0]}): {column} is "
                                     f"{str(value)[:40]!r}, not a number")

def summarize(recording: RecordedEvents) -> RecordingSummary:
    check_numeric_tables(recording)
    meta = recording.metadata if isinstance(recording.metadata, dict) else {}
    # a recording's metadata is read as found: a wrong-typed value is "not recorded", not a crash
    profile = recorded_profile(meta.get("profile"))
    hardware, load = profile.hardware, profile.load
    server = _table(meta.get("server"))

    # the first and last events published (by seq: O(log n), where min/max(ts) would scan the file)
    first_ts = next(recording.query("SELECT ts FROM events ORDER BY seq LIMIT 1"), (None,))[0]
    last_ts = next(recording.query("SELECT ts FROM events ORDER BY seq DESC LIMIT 1"), (None,))[0]
    fold = _RecordingTotals(recording)
    for seq, ts, kind, text in recording.raw_rows(exclude=_TELEMETRY_KINDS):
        row_handler = _ROW_HANDLERS.get(kind)
        if row_handler is not None:
            data = recording.parse(seq, kind, text)
            if not isinstance(data, dict):
                raise _bad(recording, seq, kind, "not a table")
            row_handler(fold, seq, ts, kind, data)
        elif kind in _DECODED_KINDS:
            event = recording.decode(seq, text, kind)  # straight from the row's JSON
            event_handler = _EVENT_HANDLERS.get(type(event))
            if event_handler is not None:
                event_handler(fold, event)
        elif kind not in _IGNORED_KINDS:
            recording.decode(seq, text, kind)  # counts kinds this version does not know
    results, windows, level_open = fold.results, fold.windows, fold.level_open
    if not split_applies(_table(meta.get("model_config"))):  # recorded before a stream's split was left out
        results = {index: unsplit_level(result) for index, result in results.items()}
    window_counts, sweep_runs, ended = fold.window_counts, fold.sweep_runs, fold.ended

    # The measured span of each level: its non-warmup windows, else start..result.
    spans: dict[tuple[int, int], tuple[float, float]] = {}
    for index, result in results.items():
        if windows.get(index):
            spans[index] = (min(s for s, _ in windows[index]), max(e for _, e in windows[index]))
        elif index in level_open:
            spans[index] = (level_open[index], result.ts)
    present = frozenset(name for _cid, name, *_rest in recording.query("PRAGMA table_info(gpu_samples)"))
    gpus, timeline = _gpu_telemetry(recording, first_ts, last_ts, present)
    level_gpu = {index: _gpu_in_span(recording, span, present) for index, span in spans.items()}
    level_host = {index: _host_in_span(recording, span) for index, span in spans.items()}
    level_parties = {index: _parties_in_span(recording, span) for index, span in spans.items()}
    host_mean, host_max = next(recording.query("SELECT avg(cpu), max(cpu) FROM host_samples"))

    levels = [
        LevelSummary(
            result=result,
            sweep=index[0],
            t_start=spans.get(index, (None, None))[0],
            t_end=spans.get(index, (None, None))[1],
            gpu=level_gpu.get(index, {}),
            host_cpu_percent=level_host.get(index),
            own_cpu_percent=level_parties.get(index, (None, None))[0],
            server_cpu_percent=level_parties.get(index, (None, None))[1],
            windows_recorded=window_counts.get(index, 0),
        )
        for index, result in results.items()
    ]
    levels.sort(key=lambda s: (s.sweep, s.result.level, s.result.index))

    variant = str(server.get("config_variant") or profile.model.variant or "")
    gpu_count = max(0, hardware.gpu_count)
    planned = mode_of(load.mode).levels(load)
    return RecordingSummary(
        path=str(recording.path),
        metadata=meta,
        profile_name=str(meta.get("profile_name") or profile.name or recording.path.stem),
        mode=_text(meta.get("mode")),
        gpu_model=hardware.gpu_model or "none",
        gpu_count=gpu_count,
        config_variant=variant,
        gpus_in_config=gpus_in_variant(variant, gpu_count),
        model=_text(server.get("model")) or profile.model.name,
        weights=profile.model.weights,
        batch_size=load.batch_size if load.batch_size > 0 else None,
        load_mode=load.mode,
        transport=load.transport or "http",
        mps=server.get("mps") if isinstance(server.get("mps"), bool) else None,
        levels_planned=planned,
        cost_per_hour=hardware.cost_per_hour if hardware.cost_per_hour > 0 else None,
        status=_session_status(ended.get("status") or meta.get("status")),
        exit_code=_int_or_none(ended.get("exit_code", meta.get("exit_code"))),
        error=_text(ended.get("error")),
        first_ts=first_ts,
        last_ts=last_ts,
        levels=levels,
        sweep=fold.sweep,
        probe=fold.probe,
        allreduce=fold.allreduce,
        topology=fold.topology,
        gpus=gpus,
        gpu_timeline=timeline,
        host_cpu_mean=host_mean,
        host_cpu_max=host_max,
        warnings=list(fold.warnings.values()),
        errors=fold.errors,
        event_counts=recording.event_counts(),
        unknown_events=recording.unknown_events,
        versions=dict(_table(meta.get("versions"))),
        host=dict(_table(meta.get("host"))),
        server=dict(server),
        model_config=dict(_table(meta.get("model_config"))),
        box_check=fold.box_check,
        sweeps=[run for _n, run in sorted(sweep_runs.items()) if run.measured],
        wires=fold.wires,
        dataset_size=profile.probe.dataset_size if (profile.probe.dataset_size or 0) > 0 else None,
        input_data=dict(_table(meta.get("input_data"))) or None,
        data=load.data,
        gpu_sharing=_gpu_sharing(gpus),
        stream_slo=",".join(load.slo) if isinstance(load.slo, list) else load.slo,
    )


class _RecordingTotals:
    """What the event rows add up to, one handler per kind (as tui/state.py applies events)."""

    def __init__(self, recording: RecordedEvents) -> None:
        self.recording = recording
        # keyed by (sweep, level index): a second sweep's level 0 is not the first one's
        self.results: dict[tuple[int, int], LevelResult] = {}
        self.level_open: dict[tuple[int, int], float] = {}
        self.windows: dict[tuple[int, int], list[tuple[float, float]]] = {}
        self.window_counts: dict[tuple[int, int], int] = {}
        self.sweep_runs: dict[int, SweepRun] = {}
        self.sweep_no = 0
        self.current = (0, -1)
        self.sweep: SweepFinished | None = None
        self.probe: list[ProbeResult] = []
        self.allreduce: list[AllReduceResult] = []
        self.topology: Topology | None = None
        self.box_check: BoxCheck | None = None
        self.wires: dict[int, WireCeiling] = {}
        self.warnings: dict[str, str] = {}
        self.errors: list[str] = []
        self.ended: dict[str, Any] = {}

    # rows read as tables (no decode: windows are the most numerous rows)
    def window(self, seq: int, ts: float, kind: str, data: dict[str, Any]) -> None:
        self.window_counts[self.current] = self.window_counts.get(self.current, 0) + 1
        if not data.get("warmup"):
            start, end = _number(data.get("t_start")), _number(data.get("t_end"))
            if start is None or end is None:
                raise _bad(self.recording, seq, kind, "t_start and t_end must be numbers")
            self.windows.setdefault(self.current, []).append((start, end))

    def level_started(self, seq: int, ts: float, kind: str, data: dict[str, Any]) -> None:
        index = data.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise _bad(self.recording, seq, kind, f"index must be an integer, found {index!r:.40}")
        trial = data.get("trial", 1)
        again = isinstance(trial, int) and not isinstance(trial, bool) and trial > 1 and self.sweep_no > 0
        if (index == 0 and not again) or self.sweep_no == 0:
            self.sweep_no += 1
        self.current = (self.sweep_no, index)
        if again:  # the level measured again: its standing result's windows are this trial's
            self.windows.pop(self.current, None)
        self.level_open[self.current] = ts
        total = data.get("total") or 0
        if isinstance(total, bool) or not isinstance(total, int) or not 0 <= total <= 1_000_000:
            raise _bad(self.recording, seq, kind, f"total must be a count of levels, found {total!r:.40}")
        self.sweep_runs.setdefault(self.sweep_no, SweepRun(self.sweep_no, total))

    def warning(self, seq: int, ts: float, kind: str, data: dict[str, Any]) -> None:
        self.warnings.setdefault(data.get("key") or data.get("message", ""), f"{data.get('source')}: {data.get('message')}")

    def error(self, seq: int, ts: float, kind: str, data: dict[str, Any]) -> None:
        self.errors.append(f"{data.get('source')}: {data.get('message')}")

    def session_ended(self, seq: int, ts: float, kind: str, data: dict[str, Any]) -> None:
        self.ended = data

    # decoded events
    def level_result(self, event: LevelResult) -> None:
        self.sweep_no = max(self.sweep_no, 1)  # a recording that starts mid-level
        again = (self.sweep_no, event.index) in self.results  # a later trial of a level replaces it
        self.results[(self.sweep_no, event.index)] = event
        run = self.sweep_runs.setdefault(self.sweep_no, SweepRun(self.sweep_no, event.index + 1))
        run.measured += 0 if again else 1
        run.interrupted = run.interrupted or event.status == "interrupted"

    def sweep_finished(self, event: SweepFinished) -> None:
        self.sweep = event
        if self.sweep_no in self.sweep_runs:
            self.sweep_runs[self.sweep_no].finished = event

    def probe_result(self, event: ProbeResult) -> None:
        self.probe.append(event)

    def allreduce_result(self, event: AllReduceResult) -> None:
        self.allreduce.append(event)

    def topology_found(self, event: Topology) -> None:
        self.topology = event

    def box_checked(self, event: BoxCheck) -> None:
        self.box_check = event

    def wire_ceiling(self, event: WireCeiling) -> None:
        self.wires[max(self.sweep_no, 1)] = event  # it follows the sweep it measured the path of


_ROW_HANDLERS: dict[str, Callable[[_RecordingTotals, int, float, str, dict[str, Any]], None]] = {
    "window": _RecordingTotals.window,
    "level_started": _RecordingTotals.level_started,
    "warning": _RecordingTotals.warning,
    "error": _RecordingTotals.error,
    "session_ended": _RecordingTotals.session_ended,
}
_EVENT_HANDLERS: dict[type, Callable[[_RecordingTotals, Any], None]] = {
    LevelResult: _RecordingTotals.level_result,
    SweepFinished: _RecordingTotals.sweep_finished,
    ProbeResult: _RecordingTotals.probe_result,
    AllReduceResult: _RecordingTotals.allreduce_result,
    Topology: _RecordingTotals.topology_found,
    BoxCheck: _RecordingTotals.box_checked,
    WireCeiling: _RecordingTotals.wire_ceiling,
}
_IGNORED_KINDS = frozenset({"session_started", "server_ready", "server_stopped", "phase"})


def _gpu_sharing(gpus: list[GpuSummary]) -> list[GpuSharing]:
    """Per GPU, the most Python-backend stubs seen at once and whether an MPS server held it:
    the session maxima of the gpu_samples columns (gpu_fields.FIELDS); none for a recording
    made before those columns, or a source without process lists."""
    return [GpuSharing(g.index, int(stubs), bool(g.stats.get("mps_server_max")))
            for g in gpus if g.index is not None and (stubs := g.stats.get("python_stubs_max")) is not None]


def _session_status(value: object) -> SessionStatus | None:
    """A recorded session status; None for a word the contract lacks (a doctored file)."""
    return next((s for s in typing.get_args(SessionStatus) if s == value), None)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: object) -> int | None:
    number = _number(value)
    return int(number) if number is not None and abs(number) < 2**31 else None


def _gpu_telemetry(
    recording: RecordedEvents, t0: float | None, t_last: float | None, present: frozenset[str]
) -> tuple[list[GpuSummary], list[tuple[float, dict[str, float]]]]:
    """Per-GPU figures for the whole session and the utilization timeline (at most
    TIMELINE_POINTS buckets), from one grouped pass over gpu_samples. Means are sums over
    counts, so merging buckets gives the exact mean of the samples."""
    if t0 is None or t_last is None:
        return [], []
    gpus = {gid: GpuSummary(uuid=uuid, index=idx, name=name, source=source or "",
                            stats={f"{f.column}_{agg}": None for f in FIELDS for agg in f.session})
            for gid, uuid, idx, name, source in recording.query("SELECT id, uuid, idx, name, source FROM gpus")}
    width = max((t_last - t0) / TIMELINE_POINTS, 1e-9)
    selected: list[str] = []  # per field, per aggregate: sum and count for a mean, max for a max
    for f in FIELDS:
        col = column_or_null(f, present)
        for agg in f.session:
            selected += [f"sum({col})", f"count({col})"] if agg == "mean" else [f"max({col})"]
    totals: dict[tuple[int, str], list[float]] = {}  # (gpu, key) -> [sum, count]
    buckets: dict[int, tuple[list[float], dict[str, float]]] = {}
    for b, gid, count, offset, *values in recording.query(
        f"SELECT min(CAST((ts - ?) / ? AS INTEGER), ?) AS b, gpu, count(*), avg(ts - ?), {', '.join(selected)} "
        "FROM gpu_samples GROUP BY b, gpu",
        (t0, width, TIMELINE_POINTS - 1, t0),
    ):
        g = gpus.get(gid)
        if g is None:
            continue
        g.samples += count
        at = 0
        for f in FIELDS:
            for agg in f.session:
                key = f"{f.column}_{agg}"
                if agg == "mean":
                    total, n = values[at], values[at + 1]
                    at += 2
                    if n:
                        acc = totals.setdefault((gid, key), [0.0, 0.0])
                        acc[0] += total
                        acc[1] += n
                        if f is TIMELINE:
                            times, utils = buckets.setdefault(b, ([], {}))
                            times.append(offset)
                            utils[g.uuid] = total / n
                else:
                    top = values[at]
                    at += 1
                    if top is not None:
                        known = g.stats.get(key)
                        g.stats[key] = top if known is None else max(known, top)
    for (gid, key), (total, n) in totals.items():
        gpus[gid].stats[key] = total / n
    ordered = sorted(gpus.values(), key=lambda g: (g.index is None, g.index if g.index is not None else 0, g.uuid))
    timeline = [(fmean(times), utils) for _b, (times, utils) in sorted(buckets.items())]
    return ordered, timeline


def _gpu_in_span(recording: RecordedEvents, span: tuple[float, float], present: frozenset[str]) -> dict[str, dict[str, Any]]:
    """column -> GPU -> value over the samples taken while a level was measured."""
    out: dict[str, dict[str, Any]] = {f.column: {} for f in FIELDS}
    selected = ", ".join(f"{'avg' if f.in_level == 'mean' else 'max'}({column_or_null(f, present, 's.')})"
                         for f in FIELDS)
    for uuid, *values in recording.query(
        f"SELECT g.uuid, {selected} FROM gpu_samples s JOIN gpus g ON g.id = s.gpu WHERE s.ts BETWEEN ? AND ? "
        "GROUP BY s.gpu", span,
    ):
        for f, value in zip(FIELDS, values, strict=True):
            if value is not None:
                out[f.column][uuid] = value
    return out


def _host_samples_over(recording: RecordedEvents, span: tuple[float, float]) -> list[tuple[float, tuple[Any, ...]]]:
    """(weight, (cpu, own, server)) of each host sample whose interval overlaps the span. A sample
    at ts covers its interval_s up to ts (older recordings: since the previous sample), so a level
    shorter than the sampler's interval (1 s) still reads the sample that covers it, weighted by
    the seconds it shares with the level."""
    start, end = span
    before = next(recording.query("SELECT max(ts) FROM host_samples WHERE ts <= ?", (start,)))[0]
    rows = recording.query(
        "SELECT h.ts, json_extract(e.data, '$.interval_s'), h.cpu, json_extract(e.data, '$.own_cpu_percent'), "
        "json_extract(e.data, '$.server_cpu_percent') FROM host_samples h JOIN events e ON e.seq = h.seq "
        "WHERE h.ts > ? AND h.ts <= coalesce((SELECT min(ts) FROM host_samples WHERE ts >= ?), ?) ORDER BY h.ts",
        (start, end, end))
    out: list[tuple[float, tuple[Any, ...]]] = []
    for ts, interval, *values in rows:
        since = ts - interval if isinstance(interval, (int, float)) and interval > 0 else before
        if since is not None and (shared := min(ts, end) - max(since, start)) > 0:
            out.append((shared, tuple(values)))
        before = ts
    return out


def _weighted_mean(samples: list[tuple[float, tuple[Any, ...]]], column: int) -> float | None:
    pairs = [(w, float(v[column])) for w, v in samples
             if isinstance(v[column], (int, float)) and not isinstance(v[column], bool)]
    total = sum(w for w, _ in pairs)
    return sum(w * v for w, v in pairs) / total if total > 0 else None


def _host_in_span(recording: RecordedEvents, span: tuple[float, float]) -> float | None:
    return _weighted_mean(_host_samples_over(recording, span), 0)


def _parties_in_span(recording: RecordedEvents, span: tuple[float, float]) -> tuple[float | None, float | None]:
    """Mean CPU of our processes and of the embedded server's over the span (100 = one core),
    from the host samples' own rows (the host_samples index holds only the host's total)."""
    samples = _host_samples_over(recording, span)
    return _weighted_mean(samples, 1), _weighted_mean(samples, 2)
