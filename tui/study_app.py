"""The TUI of a study: the usual views of the config being measured, plus the study view (key 5,
the first one shown): every config's throughput-vs-concurrency curve filling in live, and the
per-config table. Each config is its own session: the session views start afresh with each."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine import events as ev
from engine.source import EventSource
from tui.app import VIEWS, GpuscaleApp
from tui.screens.base import StateScreen
from tui.study_state import StudyState
from tui.study_view import config_table, headline, render_curves


class StudyScreen(StateScreen):
    VIEW = "study"
    SUB_TITLE = "scaling study"

    def compose_body(self) -> ComposeResult:
        yield Static(id="study-head")
        with VerticalScroll(id="study-body"):
            yield Static(id="study-curves", classes="panel")
            yield Static(id="study-table", classes="panel")

    def on_mount(self) -> None:
        self.query_one("#study-curves").border_title = "throughput vs concurrency, per config"
        self.query_one("#study-table").border_title = "configs"

    def show_study(self, study: StudyState) -> None:
        if not self.is_mounted:
            return
        width = max(30, self.size.width - 4)
        height = max(8, min(18, self.size.height - 14))
        self.query_one("#study-head", Static).update(headline(study))
        self.query_one("#study-curves", Static).update(render_curves(study, width, height))
        self.query_one("#study-table", Static).update(config_table(study))

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.show_study(self.app.study)  # type: ignore[attr-defined]  # only the study app shows this screen


class StudyApp(GpuscaleApp):
    MODES: ClassVar[dict[str, Any]] = {**GpuscaleApp.MODES, "study": StudyScreen}
    DEFAULT_MODE = "study"
    BINDINGS: ClassVar[list[BindingType]] = [
        *GpuscaleApp.BINDINGS, Binding("5", "switch_mode('study')", "Study", group=VIEWS),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.study = StudyState()
        self._study_seen = -1

    def attach(self, source: EventSource, replay: object | None = None, start: bool = True) -> None:
        self.study = StudyState()
        super().attach(source, replay=replay, start=start)

    def fold(self, event: ev.Event) -> None:
        """Each event also goes into the study state; a new config's session starts the session
        views afresh."""
        self.study.apply(event)
        if isinstance(event, ev.SessionStarted):
            self.state.reset()
        self.state.apply(event)

    def show_more(self, screen: StateScreen) -> None:
        if isinstance(screen, StudyScreen) and self.study.version != self._study_seen:
            self._study_seen = self.study.version
            screen.show_study(self.study)

    @property
    def live_running(self) -> bool:
        return self.study.finished is None and any(s.running for s in self.sources)


def run_study_tui(source: EventSource, *, title: str) -> int:
    app = StudyApp(title=title)
    app.attach(source)
    try:
        app.run()
    finally:
        app.stop_sources()
    return source.exit_code
