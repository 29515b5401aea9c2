"""docs/architecture.md's recipe "A TUI view", done here: one widget and one `VIEWS` entry give the
view its key, its footer label, its line in the help and its command, and it renders the state.
In the project the widget goes under tui/widgets/ (or beside the others in tui/screens/views.py),
the entry into `VIEWS` in tui/screens/views.py, and its layout, if any, into tui/app.tcss: at
most 3 files. Here both live in this file, on an app whose VIEWS is the project's plus this one."""

from __future__ import annotations

import pytest
from textual.app import ComposeResult
from textual.widgets import Static

from tests.tui.fakes import FakeControls, ListSource
from tests.tui.synthetic import session_events
from tests.tui.test_app_pilot import publish, screen_lines, view_of
from tui.app import GpuscaleApp
from tui.host import ViewHost
from tui.screens.base import View
from tui.screens.help import HelpScreen
from tui.screens.views import VIEWS
from tui.study_app import StudyApp
from tui.widgets.view import ViewBody

SIZE = (160, 30)  # wide enough for the whole footer: a subclass's new key comes last in it


# ---- the recipe: one widget ...
class LevelsView(ViewBody):
    """Counts the levels measured (a body of panels would need no ``show``: ViewBody's shows them)."""

    def compose(self) -> ComposeResult:
        yield Static("no level yet", id="levels-count")

    def show(self, host: ViewHost, force: bool = False) -> None:
        done = sum(1 for row in host.state.levels.values() if row.result is not None)
        total = host.state.progress().level_total
        self.query_one("#levels-count", Static).update(f"{done} levels measured, of {total or '?'}")


# ---- ... and one entry
TOY = View("levels", "7", "Levels", "levels count", "How many levels are measured", LevelsView)


class ToyApp(GpuscaleApp):
    VIEWS = (*VIEWS, TOY)


def toy_app() -> tuple[ToyApp, ListSource]:
    app = ToyApp(controls=FakeControls())
    source = ListSource(session_events(finish_levels=2, end=False), linger=False)
    app.attach(source, start=False)
    return app, source


@pytest.mark.slow
async def test_a_view_is_one_widget_and_one_entry() -> None:
    app, source = toy_app()
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events(finish_levels=2, end=False))
        app.drain()
        assert "7 Levels" in screen_lines(app)[-1]  # the footer lists its key and label
        await pilot.press("7")
        assert view_of(app) == "levels"
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "2 levels measured, of 4" in text  # it renders the state it was shown on arrival
        assert "levels count" in screen_lines(app)[0]  # the header names the view
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "| `7` | view: levels count |" in app.screen.text
        await pilot.press("escape", "1")
        assert view_of(app) == "live"
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert "View: levels count" in commands and "View: live" in commands


@pytest.mark.slow
async def test_the_study_view_is_a_views_entry_shown_only_in_a_study() -> None:
    app = GpuscaleApp(controls=FakeControls())
    app.attach(ListSource([], linger=False), start=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        assert view_of(app) == "live"  # no study: no study view, and its key does nothing
        assert " 12346 Views " in screen_lines(app)[-1]  # the footer's compact group of view keys
        await pilot.press("question_mark")
        assert "`4`" in app.screen.text and "`5`" not in app.screen.text
    study = StudyApp()
    study.attach(ListSource([], linger=False), start=False)
    async with study.run_test(size=SIZE) as pilot:
        assert view_of(study) == "study"  # the first view a study shows
        assert " 123456 Views " in screen_lines(study)[-1]
        await pilot.press("1")
        assert view_of(study) == "live"
        await pilot.press("5")
        assert view_of(study) == "study"
        await pilot.press("question_mark")
        assert "| `5` | view: scaling study |" in study.screen.text
