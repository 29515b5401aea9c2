"""What every view shares: header, replay bar, status lines, the view's widget, footer; and the
entry (`View`) that the app builds a view's mode, key, footer label, help line and command from."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual._context import NoActiveAppError
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen

from tui.host import ViewHost
from tui.widgets.footer import KeysFooter
from tui.widgets.replay_bar import ReplayBar
from tui.widgets.status import StatusBar
from tui.widgets.view import ViewBody
from tui.widgets.view_header import ViewHeader


@dataclass(frozen=True)
class View:
    name: str  # the app's mode
    key: str  # the key that shows it
    label: str  # the footer's word
    title: str  # the header's sub-title, and the help's and the command palette's name
    description: str  # a few words on what it shows (help, command palette)
    widget: type[ViewBody]  # its one widget, made afresh for each app
    study_only: bool = False  # shown only by an app that has a study's state

    def shown_by(self, host: ViewHost) -> bool:
        return not self.study_only or host.study is not None


class ViewScreen(Screen):
    """One view of the app's state. Only the visible view renders, so hidden ones cost nothing."""

    BINDINGS = [Binding("l", "levels", "Levels", show=False)]  # every view: drill into a level (live and replay); in the help

    def __init__(self, view: View, host: ViewHost) -> None:
        super().__init__()
        self.view = view
        self.host = host
        self.sub_title = view.title
        # Made while the app shows another screen, whose stylesheet is current: Textual would
        # otherwise reparse the whole stylesheet (App.refresh_css) the first two times this mode
        # is shown, since a new screen's count of CSS updates starts at -1 and refresh_css only
        # brings a mounted one up. (The app's first screen keeps Textual's way: the theme's
        # variables reach the stylesheet then.)
        try:
            app = self.app
            if app.is_running and app.screen_stack:
                self._css_update_count = app._css_update_count
        except (NoActiveAppError, KeyError):
            pass

    def compose(self) -> ComposeResult:
        yield ViewHeader(show_clock=False, icon="◆")  # no clock: screens show session time only
        bar = ReplayBar(id="replay-bar")
        bar.display = self.host.replay is not None
        yield bar
        yield StatusBar(id="status")
        yield self.view.widget()
        yield KeysFooter()

    def show_state(self, force: bool = False) -> None:
        for status in self.query(StatusBar):  # none before the screen is composed
            status.show_state(self.host.state, force)
        for body in self.query(ViewBody):
            body.show(self.host, force)

    def tick_replay(self) -> None:
        bars = self.query(ReplayBar)
        if not bars:  # not composed yet
            return
        bar = bars.first()
        bar.display = self.host.replay is not None
        if bar.display:
            bar.tick()

    def action_levels(self) -> None:
        from tui.screens.level_detail import LevelDetailScreen

        self.app.push_screen(LevelDetailScreen(self.host))

    def _styling(self) -> tuple[object, ...]:
        """What the app's CSS rules can depend on outside this screen."""
        app = self.app
        return app.theme, app.app_focus, app.size, app.ansi_color

    @property
    def has_been_suspended(self) -> bool:
        return getattr(self, "_suspended_styling", None) is not None

    def on_screen_suspend(self) -> None:
        self._suspended_styling = self._styling()

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        # Runs before Textual's own handler (Screen's), which restyles every widget of a screen
        # brought back by a mode switch: most of a switch's time. Nothing a rule matches on
        # changes in a suspended view (it gets no input), so skip it unless the app's side did.
        if getattr(self, "_suspended_styling", None) == self._styling():
            event.refresh_styles = False
        elif not self.is_current and not self.has_been_suspended:
            event.refresh_styles = False  # composed ahead, off-screen: styled as it was mounted, just now
        # Unforced: what this view last drew stays right unless a section it reads has changed
        # since (the counts in SessionState.versions never repeat) or its width has.
        self.show_state()
        self.tick_replay()
