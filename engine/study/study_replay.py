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
from engine.study.figures import scale_answer_lines, study_answer_line
from engine.study.index import read_index, recording_paths


class StudyReplaySource(EventSource):
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
        self._lock = threading.Lock()

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
                source = ReplaySource(path, speed=self.speed, linger=False, idle_timeout_s=1.0)
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
                self._current = source
            source.start()
            source.join()
            with self._lock:
                self._current = None
            if source.exit_code != 0 and self.exit_code == 0:  # a replay that failed never ends "done"
                self.exit_code, self.error = source.exit_code, source.error
            self.bus.publish(ev.StudyVariantFinished(variant=variant, position=position, status=run.status,
                                                     exit_code=run.exit_code, recording=run.recording,
                                                     error=run.error, ts=last[0]))
        self.bus.publish(ev.StudyFinished(status=ix.status, finished=ix.finished, missing=ix.missing,
                                          index_path=str(self.index_path),
                                          exit_code=0 if ix.status == "ok" else 1, ts=ix.ended or first_ts,
                                          scale_answers=scale_answer_lines(self.index_path),
                                          answer=study_answer_line(self.index_path)))
