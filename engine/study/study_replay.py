"""Replay a study: its index's events (StudyStarted, per variant Started/Finished, StudyFinished)
around each finished variant's recording, played one after another on one bus."""

from __future__ import annotations

import threading
from pathlib import Path

from engine import events as ev
from engine.bus import EventBus
from engine.errors import UserError
from engine.record.reader import Recording
from engine.record.replay_source import ReplaySource
from engine.source import EventSource
from engine.study.figures import end_lines
from engine.study.index import read_index, recording_paths


class StudyReplaySource(EventSource):
    """The replay controls of a single recording (pause, speed, seek, step, a level) act on the
    config being played; the next config starts paused or at the speed they left. `path` is that
    config's recording, so that an export writes its report."""

    def __init__(self, index_path: Path, bus: EventBus | None = None, speed: float | None = None) -> None:
        super().__init__(bus)
        self.index_path = Path(index_path)
        self.index = read_index(self.index_path)
        self.paths = recording_paths(self.index, self.index_path)
        self.levels: list[float] = []  # the planned levels and load mode, as the study announced them
        self.mode = "concurrency"
        for _variant, path in self.paths:  # bad files are bad input before anything plays
            with Recording.open(path) as recording:
                if not self.levels:
                    summary = recording.summary()
                    self.levels = [float(x) for x in summary.levels_planned]
                    self.mode = summary.load_mode or self.mode
        self.speed = speed
        self.error: str | None = None  # why the replay failed: one line
        self._stopping = threading.Event()
        self._current: ReplaySource | None = None
        self._current_path: Path | None = None
        self._paused = False
        self._done = False  # the StudyFinished is published
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the replay controls

    def _on_current(self, method: str, *args: object) -> bool:
        with self._lock:
            current = self._current
        if current is None:
            return False
        getattr(current, method)(*args)
        return True

    def pause(self) -> None:
        self._paused = True
        self._on_current("pause")

    def resume(self) -> None:
        self._paused = False
        self._on_current("resume")

    def set_speed(self, speed: float | None) -> None:
        self.speed = speed
        self._on_current("set_speed", speed)

    def seek(self, seconds_from_start: float) -> None:
        """Within the config being played, from its recording's start."""
        self._on_current("seek", seconds_from_start)

    def seek_level(self, index: int) -> None:
        if not self._on_current("seek_level", index):
            raise UserError("no config is playing: nothing to seek in")

    def step(self) -> None:
        self._on_current("step")

    def _current_value(self, name: str, default: object) -> object:
        with self._lock:
            current = self._current
        return getattr(current, name) if current is not None else default

    @property
    def position_s(self) -> float:
        return float(self._current_value("position_s", 0.0))  # type: ignore[arg-type]  # a float where there is a current

    @property
    def duration_s(self) -> float:
        return float(self._current_value("duration_s", 0.0))  # type: ignore[arg-type]  # as position_s

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def finished(self) -> bool:
        return self._done

    @property
    def path(self) -> Path | None:
        """The recording of the config being played (or played last)."""
        return self._current_path

    def _fail(self, message: str) -> None:
        self.exit_code, self.error = 2, message
        self.bus.publish(ev.Error(source="replay", message=message, fatal=True, ts=self.index.started))

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            if self._current is not None:
                self._current.stop()

    def _run(self) -> None:
        ix = self.index
        first_ts = ix.started
        self.bus.publish(ev.StudyStarted(study_id=ix.study_id, model=ix.model, variants=list(ix.variants),
                                         levels=list(self.levels), mode=self.mode, server=ix.server, slo=ix.slo,
                                         search_steps=ix.search_steps, index_path=str(self.index_path), ts=first_ts))
        runs = {r.variant: r for r in ix.runs}
        for position, (variant, path) in enumerate(self.paths):
            if self._stopping.is_set():
                break
            run = runs[variant]
            try:
                source = ReplaySource(path, speed=self.speed, linger=False, idle_timeout_s=1.0, paused=self._paused)
                with Recording.open(path) as recording:
                    first = next(recording.query("SELECT ts FROM events ORDER BY seq LIMIT 1"), (first_ts,))[0]
            except UserError as exc:  # a recording gone bad since the index was read: a failed replay
                self._fail(str(exc))
                break
            self.bus.publish(ev.StudyVariantStarted(variant=variant, position=ix.variants.index(variant)
                                                    if variant in ix.variants else position, how=run.how, ts=first))
            last = [first]
            source.bus.subscribe(self.bus.publish)

            def keep_ts(e: ev.Event, last: list[float] = last) -> None:  # bound now: the loop moves on
                last[0] = e.ts

            source.bus.subscribe(keep_ts)
            with self._lock:
                self._current, self._current_path = source, path
            source.start()
            source.join()
            with self._lock:
                self._current = None
            if source.exit_code != 0 and self.exit_code == 0:  # a replay that failed never ends "done"
                self.exit_code, self.error = source.exit_code, source.error
            self.bus.publish(ev.StudyVariantFinished(variant=variant, position=position, status=run.status,
                                                     exit_code=run.exit_code, recording=run.recording,
                                                     error=run.error, ts=last[0]))
        # an index still "running": the study stopped before it wrote its end (a crash, a kill)
        status: ev.SessionStatus = "interrupted" if ix.status == "running" else ix.status
        end = end_lines(self.index_path)
        self.bus.publish(ev.StudyFinished(status=status, finished=ix.finished, missing=ix.missing,
                                          index_path=str(self.index_path),
                                          exit_code=0 if ix.status == "ok" else 1, ts=ix.ended or first_ts,
                                          scale_answers=end.scale_answers,
                                          answer=end.answer,
                                          forecast_lines=end.forecasts))
        self._done = True
