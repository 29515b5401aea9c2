"""What every view shares: header, replay bar, status lines, footer; state pushed to its panels."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header

from tui.state import SessionState
from tui.widgets.replay_bar import ReplayBar
from tui.widgets.status import StatusBar

if TYPE_CHECKING:
    from tui.app import GpuscaleApp


class StateScreen(Screen):
    """A view of SessionState. Only the visible view renders, so hidden ones cost nothing."""

    VIEW: ClassVar[str] = ""

    @property
    def gpuscale(self) -> GpuscaleApp:
        return self.app  # type: ignore[return-value]  # screens run only inside GpuscaleApp

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◆")  # no clock: screens show session time only
        bar = ReplayBar(id="replay-bar")
        bar.display = self.gpuscale.replay is not None
        yield bar
        yield StatusBar(id="status")
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        raise NotImplementedError

    def show_state(self, state: SessionState, force: bool = False) -> None:
        for widget in self.query(".state-view"):
            widget.show_state(state, force)  # type: ignore[attr-defined]  # .state-view widgets all define show_state

    def tick_replay(self) -> None:
        bars = self.query(ReplayBar)
        if not bars:  # not composed yet
            return
        bar = bars.first()
        bar.display = self.gpuscale.replay is not None
        if bar.display:
            bar.tick()

    def on_screen_resume(self) -> None:
        self.show_state(self.gpuscale.state, force=True)
        self.tick_replay()
