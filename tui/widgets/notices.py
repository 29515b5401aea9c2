"""Warnings and errors, each shown once with how often it recurred (client self-audit included)."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from tui import format as fmt
from tui.state import SessionState
from tui.widgets.panel import Panel


def render_notices(state: SessionState, newest_first: bool = True) -> Text:
    notices = list(state.notices.values())
    if not notices:
        return Text("no warnings", style="dim")
    ordered = sorted(notices, key=lambda n: n.last_t, reverse=newest_first)
    lines = []
    for n in ordered:
        style = "bold red" if n.severity == "error" else "yellow"
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{fmt.clock(n.last_t)} ", style="dim")
        line.append("✗ " if n.severity == "error" else "! ", style=style)
        line.append(f"{n.source}: ", style="bold")
        line.append(n.message.splitlines()[0] if n.message else "")
        if n.count > 1:
            line.append(f" (x{n.count})", style="dim")
        lines.append(line)
    return Text("\n").join(lines)


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
