"""The TUI of a study: the usual views of the config being measured, plus the study view (its
`VIEWS` entry is shown only here; the first view shown). Each config is its own session: the
session views start afresh with each."""

from __future__ import annotations

from typing import Any

from engine import events as ev
from engine.source import EventSource
from tui.app import GpuscaleApp, exit_code
from tui.host import ReplayControls
from tui.study_state import StudyState


class StudyApp(GpuscaleApp):
    DEFAULT_MODE = "study"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.study = StudyState()

    def attach(self, source: EventSource, replay: ReplayControls | None = None, start: bool = True) -> None:
        self.study = StudyState()
        super().attach(source, replay=replay, start=start)

    def fold(self, event: ev.Event) -> None:
        """Each event also goes into the study state; a new config's session starts the session
        views afresh."""
        if self.study is not None:  # always, in this app
            self.study.apply(event)
        if isinstance(event, ev.SessionStarted):
            self.state.reset()
        self.state.apply(event)

    @property
    def live_running(self) -> bool:
        return self.study is not None and self.study.finished is None and any(s.running for s in self.sources)


def run_study_tui(source: EventSource, *, title: str, replay: ReplayControls | None = None) -> int:
    """``replay``: a study replay, whose controls (pause, speed, seek, step, export) the keys drive."""
    app = StudyApp(title=title, replay=replay)
    app.attach(source, replay=replay)
    try:
        app.run()
    finally:
        app.stop_sources()
    return exit_code(app, source)
