"""The event log: one line per event (telemetry excluded), newest at the bottom."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from engine import format as fmt
from tui.state import SessionState
from tui.widgets.panel import Panel

STYLE = {"error": "bold red", "warning": "yellow", "info": ""}


class EventLogPanel(Panel):
    SECTIONS = ("log",)
    TITLE = "event log"
    FOLLOW_TAIL = True
    MAX_LINES = 1000

    def __init__(self, *, tail_only: bool = False, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        # A tail that fits its box keeps a constant height: no layout pass per new line.
        self.tail_only = tail_only
        self.reads_height = tail_only

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        if not state.log:
            return Text("no event yet", style="dim")
        keep = max(1, self.size.height) if self.tail_only else self.MAX_LINES
        lines = []
        for entry in list(state.log)[-keep:]:
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"{fmt.clock(entry.t)} ", style="dim")
            line.append(entry.text.splitlines()[0], style=STYLE.get(entry.severity, ""))
            lines.append(line)
        return Text("\n").join(lines)
