"""The levels, navigable: ↑/↓ choose a level, and its windows, latency percentiles, server time
and GPU and host trace show beside (or, below 120 columns, under) the list. Live and in replay alike: it reads the
session's state, and redraws as that state changes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.host import ViewHost
from tui.level_detail import level_list, level_rows, render_level
from tui.widgets.footer import KeysFooter


class LevelDetailScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("up,k", "move(-1)", "Previous level"),
        Binding("down,j", "move(1)", "Next level"),
        Binding("escape,l,q", "close", "Close"),
    ]
    DEFAULT_CSS = """
    LevelDetailScreen { background: $background 60%; }
    #levels-box { height: 1fr; border: round $accent; border-title-style: bold; padding: 0 1; }
    #levels-list { width: 34; height: auto; }
    #level-body { width: 1fr; height: 1fr; }
    LevelDetailScreen.-narrow #levels-box { layout: vertical; }
    LevelDetailScreen.-narrow #levels-list { width: 100%; max-height: 6; }
    """

    def __init__(self, host: ViewHost, selected: int | None = None) -> None:
        super().__init__()
        self.host = host
        rows = level_rows(host.state)
        last = len(rows) - 1
        self.selected = max(0, min(last, selected if selected is not None else last))
        self._seen = -1

    def compose(self) -> ComposeResult:
        with Horizontal(id="levels-box"):
            with VerticalScroll(id="levels-list"):
                yield Static(id="levels-list-body")
            with VerticalScroll(id="level-body"):
                yield Static(id="level-body-text")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#levels-box").border_title = "levels: ↑/↓ choose, esc closes"
        self.set_class(self.app.size.width < 120, "-narrow")
        self.redraw()
        self.set_interval(0.5, self.redraw)  # the state goes on changing while a sweep runs

    def on_resize(self) -> None:
        self.set_class(self.app.size.width < 120, "-narrow")
        self.redraw(force=True)

    def redraw(self, force: bool = False) -> None:
        state = self.host.state
        if state.version == self._seen and not force:
            return
        self._seen = state.version
        rows = level_rows(state)
        if not rows:
            self.query_one("#levels-list-body", Static).update("no level yet")
            self.query_one("#level-body-text", Static).update("")
            return
        self.selected = min(self.selected, len(rows) - 1)
        self.query_one("#levels-list-body", Static).update(level_list(rows, self.selected))
        width = self.query_one("#level-body").size.width or self.app.size.width - 40
        compact = self.app.size.height < 34  # app.py's breakpoint: a short terminal
        self.query_one("#level-body-text", Static).update(
            render_level(state, rows[self.selected], max(30, width - 2), compact=compact))

    def action_move(self, step: int) -> None:
        rows = level_rows(self.host.state)
        if rows:
            self.selected = (self.selected + step) % len(rows)
            self.redraw(force=True)

    def action_close(self) -> None:
        self.dismiss(None)
