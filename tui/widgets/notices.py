"""Warnings and errors, each shown once with how often it recurred (client self-audit included)."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from engine import format as fmt
from tui.state import SessionState
from tui.widgets.panel import Panel


def render_notices(state: SessionState, newest_first: bool = True) -> RenderableType:
    """One notice per row; a long one wraps at word boundaries under its own text (a narrow
    terminal cut warnings mid-word), so the whole message is there to scroll to."""
    notices = list(state.notices.values())
    if not notices:
        return Text("no warnings", style="dim")
    ordered = sorted(notices, key=lambda n: n.last_t, reverse=newest_first)
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1, overflow="fold")
    for n in ordered:
        style = "bold red" if n.severity == "error" else "yellow"
        stamp = Text(f"{fmt.clock(n.last_t)} ", style="dim")
        stamp.append("✗" if n.severity == "error" else "!", style=style)
        line = Text(no_wrap=False)
        line.append(f"{n.source}: ", style="bold")
        line.append(n.message.splitlines()[0] if n.message else "")
        if n.count > 1:
            line.append(f" (x{n.count})", style="dim")
        grid.add_row(stamp, line)
    return grid


class NoticesPanel(Panel):
    SECTIONS = ("notices",)
    TITLE = "warnings"

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        return render_notices(state)

    def title_for(self, state: SessionState) -> str | None:
        errors = sum(1 for n in state.notices.values() if n.severity == "error")
        warnings = len(state.notices) - errors
        if not state.notices:
            return self.TITLE
        return f"warnings ({warnings})" + (f" · errors ({errors})" if errors else "")
