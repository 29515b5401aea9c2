"""What the screens show, kept by a pure reducer: ``SessionState.apply(event)``.

No Textual here: the same state drives the TUI, and unit tests feed it events directly. Time is
always the events' own ``ts`` relative to the session start (``SessionStarted.ts``), so that a
replay or a snapshot test renders the same text as the live run did.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engine import events as ev
from engine.analysis.answer import Answer, AnswerFold
from engine.analysis.scaling import cost_per_1000
from engine.analysis.stream_split import split_applies, unsplit_level, unsplit_window
from engine.analysis.time_left import Plan, TimeLeft, time_left
from engine.analysis.training_bill import TrainingBill, training_bill
from engine.columns import compute_seconds
from engine.format import level as level_label
from engine.profiles import Profile, recorded_profile
from tui.describe import describe, severity

GPU_HISTORY = 300  # samples kept per GPU: 5 minutes at the default 1 s interval
WINDOW_HISTORY = 600  # windows kept for the "over time" charts
LOG_LINES = 1000
REPLAY_RESET_KIND = "replay_reset"  # engine/record's replay clears the screens with this kind

SECTIONS = ("session", "progress", "gpus", "host", "sweep", "windows", "probe", "notices", "log")


@dataclass
class LevelRow:
    """One level of the sweep: live from its windows until its LevelResult arrives."""

    index: int
    mode: str
    level: float
    total: int
    batch_size: int
    workers: int
    started_ts: float
    trial: int = 1  # 2, 3 ...: the level measured again (the last trial stands)
    measured_windows: int = 0
    warmup_windows: int = 0
    stable_so_far: bool = False
    last_window: ev.WindowResult | None = None
    last_measured: ev.WindowResult | None = None  # the latest window past the warm-up
    result: ev.LevelResult | None = None
    finished_ts: float | None = None

    @property
    def status(self) -> ev.LevelStatus | Literal["running"]:
        """The level's status once merged; "running" before."""
        return self.result.status if self.result else "running"

    @property
    def _latest(self) -> ev.LevelResult | ev.WindowResult | None:
        return self.result or self.last_window

    @property
    def stream(self) -> ev.StreamStats | None:
        """A streaming level's figures: the merged result's, else the latest window's."""
        latest = self._latest
        return latest.stream if latest is not None else None

    @property
    def sequence(self) -> ev.SequenceStats | None:
        """A sequence model's figures: the merged result's, else the latest window's."""
        latest = self._latest
        return latest.sequence if latest is not None else None

    @property
    def throughput_ips(self) -> float | None:
        latest = self._latest
        return latest.throughput_ips if latest else None

    @property
    def throughput_rps(self) -> float | None:
        latest = self._latest
        return latest.throughput_rps if latest else None

    @property
    def latency(self) -> ev.LatencyStats | None:
        latest = self._latest
        return latest.latency if latest else None

    @property
    def server(self) -> ev.ServerBreakdown | None:
        latest = self._latest
        return latest.server if latest else None

    @property
    def audit(self) -> ev.ClientAudit | None:
        """The client's verdict: the merged result's, else the latest measured window's. A warm-up
        window measures nothing (the workers and connections are still starting): no verdict."""
        latest = self.result or self.last_measured
        return latest.audit if latest else None

    @property
    def errors(self) -> int:
        latest = self._latest
        return latest.errors if latest else 0

    @property
    def duration_s(self) -> float | None:
        if self.result is not None and self.result.duration_s > 0:
            return self.result.duration_s
        if self.finished_ts is not None:
            return self.finished_ts - self.started_ts
        return None


@dataclass
class PastSweep:
    """An earlier sweep of this session, kept whole: a new sweep starts its own table."""

    number: int
    levels: list[LevelRow]
    finished: ev.SweepFinished | None


@dataclass
class GpuTrack:
    """History of one GPU, by uuid (indices can differ between NVML and Triton's /metrics)."""

    uuid: str
    latest: ev.GpuReading
    util: deque[float | None] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))
    mem_fraction: deque[float | None] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))
    power: deque[float | None] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))
    times: deque[float] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))  # each sample's ts

    def add(self, reading: ev.GpuReading, ts: float = 0.0) -> None:
        self.latest = reading
        self.times.append(ts)
        self.util.append(reading.util_gpu)
        frac = None
        if reading.mem_used is not None and reading.mem_total:
            frac = reading.mem_used / reading.mem_total
        self.mem_fraction.append(frac)
        self.power.append(reading.power_w)


@dataclass
class HostTrack:
    latest: ev.HostSample
    cpu: deque[float | None] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))
    own_cpu: deque[float | None] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))
    server_cpu: deque[float | None] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))
    times: deque[float] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))  # each sample's ts


@dataclass
class WindowPoint:
    """One window on the session timeline, for the "over time" charts."""

    t: float  # seconds since session start (window end)
    level: float
    warmup: bool
    throughput_ips: float
    p50: float | None
    p95: float | None
    p99: float | None
    queue: float | None
    compute: float | None
    tokens_per_s: float | None = None  # a streaming model's output tokens/s in the window
    throughput_rps: float | None = None  # requests/s: what a streaming model's rate counts
    ttft_p99: float | None = None  # its time to the first response, p99


@dataclass
class Notice:
    """A warning or error shown once per key, with how often it recurred."""

    key: str
    severity: str  # "warning" or "error"
    source: str
    message: str
    count: int
    first_t: float
    last_t: float


@dataclass
class LogLine:
    t: float
    severity: str
    text: str


@dataclass
class Progress:
    phase: str
    detail: str
    level_index: int | None  # 0-based index of the running (or last) level
    level_total: int | None
    level_label: str | None
    levels_done: int
    window_index: int | None
    measured_windows: int
    warmup: bool
    stable_so_far: bool
    level_elapsed_s: float | None
    time_left: TimeLeft | None  # the sweep's (engine/analysis/time_left.py); None: none running
    sweep_done: bool


def notice_key(event: ev.Warning | ev.Error) -> str:
    if isinstance(event, ev.Warning) and event.key:
        return event.key
    return f"{event.kind}:{event.source}:{event.message}"


class SessionState:
    """Everything the screens show, rebuilt from events alone."""

    def __init__(self) -> None:
        self.reset()

    # ------------------------------------------------------------------ reducer

    def reset(self) -> None:
        self.session: ev.SessionStarted | None = None
        self.profile = Profile()  # the session's profile as recorded, typed: defaults until it starts
        self.t0: float | None = None
        self.now: float | None = None  # ts of the newest event: the session's own clock
        self.phase = "waiting"
        self.phase_detail = ""
        self.server: ev.ServerReady | None = None
        self.server_stopped: ev.ServerStopped | None = None
        self.ended: ev.SessionEnded | None = None
        self.levels: OrderedDict[int, LevelRow] = OrderedDict()
        self.current_level: int | None = None
        # LevelStarted events folded, each trial and each sweep counted: the replay's level
        # starts are numbered alike, so `[` and `]` step through every one (a level's trial 2 too)
        self.level_starts = 0
        self.sweep_number = 0  # a re-run sweep in the same session starts a new table
        self.past_sweeps: list[PastSweep] = []  # the earlier tables, oldest first
        self.windows: list[ev.WindowResult] = []  # of the current level
        self.timeline: deque[WindowPoint] = deque(maxlen=WINDOW_HISTORY)
        # the sweep's level, window and level-result events: its time left is read from them
        self.sweep_events: list[ev.Event] = []
        self.sweep_finished: ev.SweepFinished | None = None
        self.gpus: OrderedDict[str, GpuTrack] = OrderedDict()
        self.gpu_source: str | None = None
        self.gpu_interval_s: float | None = None
        self.host: HostTrack | None = None
        self.probe: list[ev.ProbeResult] = []
        self.allreduce: list[ev.AllReduceResult] = []
        self.topology: ev.Topology | None = None
        self.box_check: ev.BoxCheck | None = None
        self.notices: OrderedDict[str, Notice] = OrderedDict()
        self.log: deque[LogLine] = deque(maxlen=LOG_LINES)
        self.recording: Path | None = None  # where the live session records to (absolute), once known
        self.answers = AnswerFold()  # the headline figures, by the rule every report uses
        self.events_applied = 0
        self.version = 0
        # Never back to an earlier count, even on a reset: a view that saw a count has drawn it.
        old: dict[str, int] = getattr(self, "versions", {})
        self.versions: dict[str, int] = {name: old.get(name, 0) + 1 for name in SECTIONS}

    def apply(self, event: ev.Event) -> None:
        """Fold one event into the state. Unknown event kinds only advance the clock."""
        if getattr(event, "kind", None) == REPLAY_RESET_KIND:
            self.reset()
            self._touch(*SECTIONS)
            return
        self.events_applied += 1
        event = self._split_left_out(event)
        self.answers.apply(event)
        if self.t0 is None:
            self.t0 = event.ts
        if self.now is None or event.ts > self.now:
            self.now = event.ts
            self._touch("progress")
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)
        text = describe(event)
        if text is not None and not self._is_repeat_notice(event):
            self.log.append(LogLine(self.rel(event.ts), severity(event), text))
            self._touch("log")
        self.version += 1

    def _split_left_out(self, event: ev.Event) -> ev.Event:
        """A decoupled model's levels and windows without Triton's queue/compute split, which does
        not cover a stream (engine/analysis/stream_split.py): recordings made before the sweep left
        it out still carry it."""
        if self.server is None or split_applies(self.server.model_config):
            return event
        if isinstance(event, ev.LevelResult):
            return unsplit_level(event)
        if isinstance(event, ev.WindowResult):
            return unsplit_window(event)
        return event

    def set_recording(self, path: Path) -> None:
        """The live session's recording (the session opens it on its own thread: no event says it)."""
        self.recording = path
        self._touch("notices")

    def apply_all(self, events: list[ev.Event]) -> None:
        for event in events:
            self.apply(event)

    def _touch(self, *sections: str) -> None:
        for name in sections:
            self.versions[name] += 1

    def _is_repeat_notice(self, event: ev.Event) -> bool:
        if isinstance(event, (ev.Warning, ev.Error)):
            notice = self.notices.get(notice_key(event))
            return notice is not None and notice.count > 1
        return False

    # ------------------------------------------------------------------ handlers

    def _on_session_started(self, e: ev.SessionStarted) -> None:
        self.session = e
        self.profile = recorded_profile(e.profile)
        self.t0 = e.ts
        self._touch("session", "progress")

    def _on_phase(self, e: ev.PhaseChanged) -> None:
        self.phase, self.phase_detail = e.phase, e.detail
        self._touch("progress")

    def _on_server_ready(self, e: ev.ServerReady) -> None:
        self.server = e
        self.server_stopped = None
        self._touch("session")

    def _on_server_stopped(self, e: ev.ServerStopped) -> None:
        self.server_stopped = e
        self._touch("session")

    def _on_level_started(self, e: ev.LevelStarted) -> None:
        new_sweep = e.index == 0 and e.trial <= 1  # a later trial measures a level of this sweep again
        if new_sweep and self.levels:  # a new sweep in the same session: the old table is kept apart
            self.past_sweeps.append(PastSweep(self.sweep_number, list(self.levels.values()), self.sweep_finished))
            self.levels.clear()
            self.sweep_finished = None
        if new_sweep:
            self.sweep_number += 1
            self.sweep_events = []
        self.sweep_events.append(e)
        self.levels[e.index] = LevelRow(
            index=e.index,
            mode=e.mode,
            level=e.level,
            total=e.total,
            batch_size=e.batch_size,
            workers=e.workers,
            started_ts=e.ts,
            trial=e.trial,
        )
        self.current_level = e.index
        self.level_starts += 1
        self.windows = []
        self._touch("sweep", "windows", "progress")

    def _row_for(self, level: float, index: int | None = None) -> LevelRow | None:
        if index is not None and index in self.levels and self.levels[index].level == level:
            return self.levels[index]
        if self.current_level is not None:
            row = self.levels.get(self.current_level)
            if row is not None and row.level == level:
                return row
        for row in reversed(self.levels.values()):
            if row.level == level:
                return row
        return None

    def _on_window(self, e: ev.WindowResult) -> None:
        row = self._row_for(e.level)
        if row is not None and row.result is None:
            row.last_window = e
            row.stable_so_far = e.stable_so_far
            if e.warmup:
                row.warmup_windows += 1
            else:
                row.measured_windows += 1
                row.last_measured = e
        self.windows.append(e)
        self.sweep_events.append(e)
        self.timeline.append(
            WindowPoint(
                t=self.rel(e.t_end),
                level=e.level,
                warmup=e.warmup,
                throughput_ips=e.throughput_ips,
                p50=e.latency.p50,
                p95=e.latency.p95,
                p99=e.latency.p99,
                queue=e.server.queue if e.server else None,
                compute=compute_seconds(e.server),
                tokens_per_s=e.stream.output_tokens_per_s if e.stream else None,
                throughput_rps=e.throughput_rps,
                ttft_p99=e.stream.ttft.p99 if e.stream else None,
            )
        )
        # no client-bound notice from one window (warm-up included): the level's verdict, from
        # its measured windows, comes with its result
        self._touch("sweep", "windows", "progress")

    def _on_level_result(self, e: ev.LevelResult) -> None:
        row = self._row_for(e.level, e.index)
        if row is None:  # a recording that starts mid-level
            row = LevelRow(e.index, e.mode, e.level, e.index + 1, e.batch_size, 1, e.ts - e.duration_s, trial=e.trial)
            self.levels[e.index] = row
        row.result = e
        row.finished_ts = e.ts
        self.sweep_events.append(e)
        row.stable_so_far = e.status == "stable"
        if e.audit.client_bound:
            self._audit_notice(e.level, e.audit, e.ts)
        self._touch("sweep", "progress")

    def _on_sweep_finished(self, e: ev.SweepFinished) -> None:
        self.sweep_finished = e
        if self.phase == "sweep":  # a live session waits for the next request without a phase event
            self.phase, self.phase_detail = "sweep done", ""
        self._touch("sweep", "progress")

    def _on_gpu_sample(self, e: ev.GpuSample) -> None:
        self.gpu_source, self.gpu_interval_s = e.source, e.interval_s
        for reading in e.gpus:
            track = self.gpus.get(reading.uuid)
            if track is None:
                track = self.gpus[reading.uuid] = GpuTrack(reading.uuid, reading)
            track.add(reading, e.ts)
        self._touch("gpus")

    def _on_host_sample(self, e: ev.HostSample) -> None:
        if self.host is None:
            self.host = HostTrack(e)
        self.host.latest = e
        self.host.cpu.append(e.cpu_percent)
        self.host.own_cpu.append(e.own_cpu_percent)
        self.host.server_cpu.append(e.server_cpu_percent)
        self.host.times.append(e.ts)
        self._touch("host")

    def _on_topology(self, e: ev.Topology) -> None:
        self.topology = e
        self._touch("probe")

    def _on_box_check(self, e: ev.BoxCheck) -> None:
        self.box_check = e
        self._touch("probe")

    def _on_probe_result(self, e: ev.ProbeResult) -> None:
        self.probe.append(e)
        self._touch("probe")

    def _on_allreduce(self, e: ev.AllReduceResult) -> None:
        self.allreduce.append(e)
        self._touch("probe")

    def _on_notice(self, e: ev.Warning | ev.Error) -> None:
        key = notice_key(e)
        kind = "error" if isinstance(e, ev.Error) else "warning"
        self._add_notice(key, kind, e.source, e.message, e.ts)
        if isinstance(e, ev.Error) and e.fatal and self.ended is None:
            self.phase, self.phase_detail = "failed", e.message.splitlines()[0] if e.message else ""
            self._touch("progress")

    def _on_session_ended(self, e: ev.SessionEnded) -> None:
        self.ended = e
        # the phase says how it ended: a session that failed while starting is not "waiting"
        self.phase = "finished" if e.status == "ok" else e.status
        self.phase_detail = (e.error or "").splitlines()[0] if e.error else ""
        self._touch("session", "progress")

    def _audit_notice(self, level: float, audit: ev.ClientAudit, ts: float) -> None:
        """One notice per level: the reasons' numbers change every window, the finding doesn't."""
        reasons = "; ".join(audit.reasons) if audit.reasons else "the load generator is the limit"
        row = self._row_for(level)
        label = f"{level:g}" if row is None else _label(row)
        self._add_notice(f"audit:{label}", "warning", "client", f"client-bound at level {label}: {reasons}", ts)

    def _add_notice(self, key: str, kind: str, source: str, message: str, ts: float) -> None:
        t = self.rel(ts)
        notice = self.notices.get(key)
        if notice is None:
            self.notices[key] = Notice(key, kind, source, message, 1, t, t)
        else:
            notice.count += 1
            notice.last_t = t
            notice.message = message
        self._touch("notices")

    # ------------------------------------------------------------------ queries

    def rel(self, ts: float | None) -> float:
        """Seconds since the session started (0 before anything is known)."""
        if ts is None or self.t0 is None:
            return 0.0
        return ts - self.t0

    @property
    def elapsed_s(self) -> float:
        return self.rel(self.now)

    @property
    def cost_per_hour(self) -> float:
        return max(0.0, self.profile.hardware.cost_per_hour)

    @property
    def slo_text(self) -> str:
        """load.slo: a streaming sweep's objectives ("" where the profile has none)."""
        value = self.profile.load.slo
        return ",".join(value) if isinstance(value, list) else value

    @property
    def dataset_size(self) -> int | None:
        """probe.dataset_size (samples per epoch); None where the profile has none (older ones)."""
        size = self.profile.probe.dataset_size
        return size if size is not None and size > 0 else None

    def training_bill(self) -> TrainingBill:
        """Time and $ per epoch at each world size of the probe's results, and where to stop."""
        box_gpus = max(0, self.profile.hardware.gpu_count)
        return training_bill(self.probe, self.dataset_size, self.cost_per_hour, box_gpus)

    @property
    def gpu_count(self) -> int:
        """GPUs the profile declares, else the GPUs telemetry has seen."""
        return max(0, self.profile.hardware.gpu_count) or len(self.gpus)

    def own_cpu_of_host(self, own_cpu_percent: float | None) -> float | None:
        """Our processes' CPU (measured in % of one core) as a share of the whole machine, the
        host CPU's 0-100 % scale: the screen and the log say the same figure."""
        if own_cpu_percent is None:
            return None
        cores = self.session.host.get("cpu_cores") if self.session else None
        if not isinstance(cores, int) or cores < 1:
            cores = len(self.host.latest.per_core) if self.host is not None else 0
        return own_cpu_percent / max(1, cores)

    def cost_per_1000(self, throughput_ips: float | None) -> float | None:
        if throughput_ips is None:
            return None
        return cost_per_1000(self.cost_per_hour, throughput_ips)

    def answer(self) -> Answer:
        """The sweep's headline figures by the one rule of engine/analysis/answer.py."""
        return self.answers.answer()

    def best_level(self) -> LevelRow | None:
        """The best sound level (engine/analysis/answer.py): stable, uncontended, measured to
        the end; None while no level is sound."""
        best = self.answer().best
        if best is None:
            return None
        row = self.levels.get(best.index)
        return row if row is not None and row.result is best else None

    @property
    def running(self) -> bool:
        return self.ended is None

    def progress(self) -> Progress:
        row = self.levels.get(self.current_level) if self.current_level is not None else None
        done = sum(1 for r in self.levels.values() if r.result is not None)
        last = self.windows[-1] if self.windows else None
        return Progress(
            phase=self.phase,
            detail=self.phase_detail,
            level_index=row.index if row else None,
            level_total=row.total if row else None,
            level_label=_label(row) if row else None,
            levels_done=done,
            window_index=last.index if last else None,
            measured_windows=row.measured_windows if row else 0,
            warmup=bool(last.warmup) if last else False,
            stable_so_far=row.stable_so_far if row else False,
            level_elapsed_s=(self.now - row.started_ts) if row and self.now and row.result is None else None,
            time_left=self.time_left(),
            sweep_done=self.sweep_finished is not None,
        )

    def time_left(self) -> TimeLeft | None:
        """The sweep's time left now, by the one rule (engine/analysis/time_left.py)."""
        if self.sweep_finished is not None or self.now is None:
            return None
        return time_left(Plan.of(self.profile.load), self.sweep_events, self.now)

def _label(row: LevelRow) -> str:
    return level_label(row.mode, row.level)


# each handler takes its own event type: Any, as a dict of handlers cannot say which
_HANDLERS: dict[type, Callable[[SessionState, Any], None]] = {
    ev.SessionStarted: SessionState._on_session_started,
    ev.PhaseChanged: SessionState._on_phase,
    ev.ServerReady: SessionState._on_server_ready,
    ev.ServerStopped: SessionState._on_server_stopped,
    ev.LevelStarted: SessionState._on_level_started,
    ev.WindowResult: SessionState._on_window,
    ev.LevelResult: SessionState._on_level_result,
    ev.SweepFinished: SessionState._on_sweep_finished,
    ev.GpuSample: SessionState._on_gpu_sample,
    ev.HostSample: SessionState._on_host_sample,
    ev.Topology: SessionState._on_topology,
    ev.BoxCheck: SessionState._on_box_check,
    ev.ProbeResult: SessionState._on_probe_result,
    ev.AllReduceResult: SessionState._on_allreduce,
    ev.Warning: SessionState._on_notice,
    ev.Error: SessionState._on_notice,
    ev.SessionEnded: SessionState._on_session_ended,
}
