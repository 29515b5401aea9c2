"""The study view: every config's throughput-vs-concurrency curve filling in live, and the
per-config table (pictures from tui/study_view.py, of the study's own state)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.host import ViewHost
from tui.study_view import config_table, headline, render_curves, scale_answers
from tui.widgets.view import ViewBody


class StudyView(ViewBody):
    def __init__(self) -> None:
        super().__init__()
        self._seen = -1  # the study state's version last shown

    def compose(self) -> ComposeResult:
        yield Static(id="study-head")
        with VerticalScroll(id="study-body"):
            yield Static(id="study-curves", classes="panel")
            yield Static(id="study-table", classes="panel")
            yield Static(id="study-scale", classes="panel")

    def on_mount(self) -> None:
        self.query_one("#study-curves").border_title = "throughput vs concurrency, per config"
        self.query_one("#study-table").border_title = "configs"
        self.query_one("#study-scale").border_title = "scale out or scale up"
        self.query_one("#study-scale").display = False  # until a study with a scale-out config ends

    def show(self, host: ViewHost, force: bool = False) -> None:
        study = host.study
        if study is None or not self.is_mounted or (study.version == self._seen and not force):
            return
        self._seen = study.version
        size = self.app.size  # the terminal's: the curves take what the screen has room for
        width = max(30, size.width - 4)
        height = max(8, min(18, size.height - 14))
        self.query_one("#study-head", Static).update(headline(study))
        self.query_one("#study-curves", Static).update(render_curves(study, width, height))
        self.query_one("#study-table", Static).update(config_table(study))
        answers = scale_answers(study)
        scale = self.query_one("#study-scale", Static)
        scale.display = bool(answers.plain)
        scale.update(answers)
