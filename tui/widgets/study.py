"""The study view: every config's throughput-vs-concurrency curve and its knee (latency against
throughput, the target's line) filling in live, and the per-config table (pictures from
tui/study_view.py, of the study's own state)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from tui.host import ViewHost
from tui.study_view import (
    answer_text,
    config_table,
    forecasts,
    headline,
    render_curves,
    render_knee,
    scale_answers,
)
from tui.widgets.view import ViewBody

WIDE = 120  # app.py's breakpoint: the curves and the knee side by side


class StudyBody(VerticalScroll):
    """The view's scrolling body: its height, once laid out, sizes the charts."""

    def on_resize(self) -> None:
        view = self.parent
        host = getattr(self.screen, "host", None)  # the view screen's (tui/screens/base.py)
        if isinstance(view, StudyView) and host is not None:
            view.show(host, force=True)


class StudyView(ViewBody):
    def __init__(self) -> None:
        super().__init__()
        self._seen = -1  # the study state's version last shown

    def compose(self) -> ComposeResult:
        yield Static(id="study-head")
        with StudyBody(id="study-body"):
            with Horizontal(id="study-charts"):  # side by side from 120 columns (app.tcss)
                yield Static(id="study-curves", classes="panel")
                yield Static(id="study-knee", classes="panel")
            yield Static(id="study-table", classes="panel")
            yield Static(id="study-knee-low", classes="panel")  # below 120 columns: after the table
            yield Static(id="study-scale", classes="panel")
            yield Static(id="study-forecast", classes="panel")

    def on_mount(self) -> None:
        self.query_one("#study-curves").border_title = "throughput vs concurrency, per config"
        for knee in ("#study-knee", "#study-knee-low"):
            self.query_one(knee).border_title = "the knee: latency vs throughput, per config"
        self.query_one("#study-table").border_title = "configs"
        self.query_one("#study-scale").border_title = "scale out or scale up"
        self.query_one("#study-scale").display = False  # until a study with a scale-out config ends
        self.query_one("#study-forecast").border_title = "predicted from the smaller configs"
        self.query_one("#study-forecast").display = False  # until a study of GPU configs ends

    def _chart_height(self, below: list[RenderableType], width: int, terminal_rows: int) -> int:
        """The charts' lines: the first screen's rows that the panels ``below`` them leave (the
        config table, the end's answers), so that no blank band stays under those, borders
        counted; before the body is laid out, a share of the terminal's rows."""
        least = max(8, min(18, terminal_rows - 14))
        body = self.query_one("#study-body").size.height
        if body <= 0:
            return least
        border = 1 if self.screen.has_class("-short") else 2  # app.tcss: a top rule on short screens
        console = self.app.console
        options = console.options.update(width=width)
        taken = sum(len(console.render_lines(panel, options, pad=False)) + border for panel in below)
        return max(least, body - taken - border)

    def show(self, host: ViewHost, force: bool = False) -> None:
        study = host.study
        if study is None or not self.is_mounted or (study.version == self._seen and not force):
            return
        self._seen = study.version
        size = self.app.size  # the terminal's: the curves take what the screen has room for
        width = max(30, size.width - 4)
        # a column to spare: a scrollbar that comes would otherwise wrap every chart line
        chart_w = (width - 6) // 2 if size.width >= WIDE else width - 1
        answer = answer_text(study)  # under the headline once the study has ended
        self.query_one("#study-head", Static).update(headline(study) if answer is None else Group(headline(study), answer))
        table = config_table(study, width - 4)
        self.query_one("#study-table", Static).update(table)
        answers = scale_answers(study)
        scale = self.query_one("#study-scale", Static)
        scale.display = bool(answers.plain)
        scale.update(answers)
        predicted = forecasts(study)
        forecast = self.query_one("#study-forecast", Static)
        forecast.display = bool(predicted.plain)
        forecast.update(predicted)
        below: list[RenderableType] = [table, *(t for t in (answers, predicted) if t.plain)]  # first screen too
        height = self._chart_height(below, width - 4, size.height)
        self.query_one("#study-curves", Static).update(render_curves(study, chart_w, height))
        knee = render_knee(study, chart_w, height)
        self.query_one("#study-knee", Static).update(knee)
        self.query_one("#study-knee-low", Static).update(knee)
