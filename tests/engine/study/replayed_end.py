"""The StudyFinished a replay of a study index ends with (for the study tests)."""

from __future__ import annotations

from pathlib import Path

from engine import events as ev


def replayed_end(path: Path) -> ev.StudyFinished:
    from engine.study.study_replay import StudyReplaySource

    replay = StudyReplaySource(path, speed=1000.0)
    ends: list[ev.StudyFinished] = []
    replay.bus.subscribe(lambda e: ends.append(e) if isinstance(e, ev.StudyFinished) else None)
    replay.start()
    replay.join(60)
    (end,) = ends
    return end
