"""What the study view and the headless study lines show, kept by a pure reducer over the study
source's events (no Textual): per config its throughput curve as levels finish, its status, and
the time left for the whole study."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from engine import events as ev
from engine.analysis.answer import decide, output_rate, standing
from engine.analysis.time_left import Plan, StudyPlan, TimeLeft, study_time_left
from engine.profiles import Profile, recorded_profile


@dataclass
class ConfigTrack:
    variant: str
    status: ev.SessionStatus | Literal["waiting", "running"] = "waiting"  # then the session's
    # level, images/s (a streaming model's tokens/s), latency, search
    points: list[tuple[float, float, float | None, bool]] = field(default_factory=list)
    levels_done: int = 0
    unstable: set[float] = field(default_factory=set)  # levels not sound for a decision
    recording: str | None = None
    how: str = ""
    started_at: float | None = None  # the config's start (its server start and any check follow)
    first_level_at: float | None = None  # its first level's start
    last_level_at: float | None = None  # its last level's end
    opened_at: float | None = None  # the previous config's end (its time starts there), else its start
    finished_at: float | None = None
    results: list[ev.LevelResult] = field(default_factory=list)  # every trial, in order

    def overhead_s(self) -> float | None:
        """A finished config's time outside its sweep: server start, box check, stop."""
        if self.finished_at is None or self.opened_at is None:
            return None
        sweep = (self.last_level_at - self.first_level_at
                 if self.first_level_at is not None and self.last_level_at is not None else 0.0)
        return max(0.0, self.finished_at - self.opened_at - sweep)

    def peak(self) -> tuple[float, float] | None:
        """(level, images/s, or a streaming model's tokens/s) of the best sound level
        (engine/analysis/answer.py: the rule of every report); None while none is sound."""
        best = decide(self.results).best
        return (float(best.level), output_rate(best)) if best is not None else None


def time_left(elapsed_s: float, levels_done: int, levels_left: int) -> float | None:
    """Seconds left at the pace so far (server starts included in the pace); None before the
    first level finished."""
    if levels_done <= 0 or elapsed_s <= 0:
        return None
    return elapsed_s / levels_done * max(levels_left, 0)


def paced_time_left(level_s: float, levels_done: int, levels_left: int, start_s: float, configs_waiting: int) -> float | None:
    """Seconds left from the time levels take (``level_s`` over ``levels_done``) plus one config
    start (``start_s``: server start, as measured) per config still waiting. Not the plain pace:
    a config's start (the box check, the server's start) is no level's time, and counted into the
    pace of the first levels it inflates every level left."""
    if levels_done <= 0 or level_s <= 0:
        return None
    return level_s / levels_done * max(levels_left, 0) + max(start_s, 0.0) * configs_waiting


class StudyState:
    def __init__(self) -> None:
        self.started: ev.StudyStarted | None = None
        self.finished: ev.StudyFinished | None = None
        self.configs: dict[str, ConfigTrack] = {}
        self.current: str | None = None
        self.t0: float | None = None
        self.now: float | None = None
        self.version = 0
        self.plan = Plan.of(Profile().load)  # the configs' sweep, from their SessionStarted
        self.sweep: list[ev.Event] | None = None  # the running config's level events
        self.last_sweep: list[ev.Event] = []  # the latest finished config's that ran a level
        self.last_finish: float | None = None

    @property
    def items(self) -> str:
        """What the study's throughput counts, as "<items>/s": "tokens" for a streaming model,
        else "infer" (inferences: the sweep tables' infer/s, one unit name on every screen)."""
        streaming = any(r.stream is not None for t in self.configs.values() for r in t.results)
        return "tokens" if streaming else "infer"

    @property
    def percentile(self) -> str:
        slo = self.started.slo if self.started else None
        return slo.split("=")[0] if slo else "p99"

    def apply(self, event: ev.Event) -> None:
        if self.t0 is None:
            self.t0 = event.ts
        self.now = max(self.now or event.ts, event.ts)
        if isinstance(event, ev.StudyStarted):
            self.started = event
            self.t0 = event.ts
            self.configs = {v: ConfigTrack(v) for v in event.variants}
        elif isinstance(event, ev.StudyVariantStarted):
            self.current = event.variant
            track = self.configs.setdefault(event.variant, ConfigTrack(event.variant))
            track.status, track.how = "running", event.how
            track.started_at = event.ts
            track.opened_at = self.last_finish if self.last_finish is not None else event.ts
            self.sweep = []
        elif isinstance(event, ev.SessionStarted):
            self.plan = Plan.of(recorded_profile(event.profile).load)
            return
        elif isinstance(event, ev.WindowResult | ev.SweepFinished):
            self._sweep_event(event)  # the time left moves
        elif isinstance(event, ev.LevelStarted) and self.current in self.configs:
            track = self.configs[self.current]
            if track.first_level_at is None:
                track.first_level_at = event.ts
            self._sweep_event(event)  # the time left moves
        elif isinstance(event, ev.LevelResult) and self.current in self.configs:
            track = self.configs[self.current]
            again = any(r.index == event.index and r.level == event.level for r in track.results)  # a later trial
            track.results.append(event)
            track.points = []
            for r in standing(track.results):
                latency = getattr(r.latency, self.percentile, None)
                usable = r.status != "failed" and r.requests > 0
                track.points.append((float(r.level), output_rate(r) if usable else 0.0,
                                     latency if usable else None, r.slo_search))
            track.points.sort(key=lambda p: p[0])
            track.unstable = {float(r.level) for r in standing(track.results) if r.status != "stable"}
            track.levels_done += 0 if again else 1
            track.last_level_at = event.ts
            self._sweep_event(event)
        elif isinstance(event, ev.ReplayReset) and self.current in self.configs:
            # a seek back in the config being replayed: its levels come again from the start
            track = self.configs[self.current]
            track.points, track.results, track.levels_done, track.unstable = [], [], 0, set()
            track.first_level_at = track.last_level_at = None
            self.sweep = []
        elif isinstance(event, ev.StudyVariantFinished):
            track = self.configs.setdefault(event.variant, ConfigTrack(event.variant))
            track.status, track.recording = event.status, event.recording
            track.finished_at = self.last_finish = event.ts
            if self.sweep and any(isinstance(e, ev.LevelResult) for e in self.sweep):
                self.last_sweep = self.sweep
            self.current, self.sweep = None, None
        elif isinstance(event, ev.StudyFinished):
            self.finished = event
        else:
            return
        self.version += 1

    def _sweep_event(self, event: ev.Event) -> None:
        if self.sweep is not None:
            self.sweep.append(event)

    @property
    def elapsed_s(self) -> float:
        return (self.now or 0.0) - (self.t0 or 0.0)

    def levels_left(self) -> int:
        """Planned levels not run yet, the SLO search counted at its full budget (an upper bound)."""
        if self.started is None:
            return 0
        per_variant = len(self.started.levels) + self.started.search_steps
        left = 0
        for track in self.configs.values():
            if track.status == "waiting":
                left += per_variant
            elif track.status == "running":
                left += max(0, per_variant - track.levels_done)
        return left

    def levels_done(self) -> int:
        return sum(t.levels_done for t in self.configs.values())

    def time_left(self) -> TimeLeft | None:
        """The whole study's time left (engine/analysis/time_left.py's rule), its likely figure
        at the levels' pace (time_left_s); None before the study started."""
        if self.started is None:
            return None
        if self.finished is not None:
            return TimeLeft(0.0, 0.0, 0.0)
        study = StudyPlan(self.plan, len(self.started.levels), self.started.search_steps)
        waiting = sum(1 for t in self.configs.values() if t.status == "waiting")
        overheads = [o for t in self.configs.values() if (o := t.overhead_s()) is not None]
        return study_time_left(study, self.sweep, self.last_sweep, self.now or 0.0, waiting, overheads,
                               self.time_left_s())

    def time_left_s(self) -> float | None:
        """The likely figure: the levels' pace and the config starts measured."""
        if self.finished is not None:
            return 0.0
        level_s, timed_levels, starts = 0.0, 0, []
        for t in self.configs.values():
            if t.first_level_at is None or t.last_level_at is None:
                continue
            level_s += t.last_level_at - t.first_level_at
            timed_levels += t.levels_done
            if t.started_at is not None:
                starts.append(t.first_level_at - t.started_at)
        if not timed_levels:  # no level start seen (an older source): the plain pace
            return time_left(self.elapsed_s, self.levels_done(), self.levels_left())
        waiting = sum(1 for t in self.configs.values() if t.status == "waiting")
        # the configs after the first carry no box check (the study checks once): the shortest
        # start measured is the best guess for the next
        return paced_time_left(level_s, timed_levels, self.levels_left(), min(starts, default=0.0), waiting)

    def position(self) -> tuple[int, int]:
        """(1-based number of the variant running or last finished, variants in the study)."""
        variants = list(self.configs)
        done = [v for v, t in self.configs.items() if t.status not in ("waiting",)]
        return (len(done), len(variants))
