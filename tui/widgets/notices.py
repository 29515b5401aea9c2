"""Warnings and errors, each shown once with how often it recurred (client self-audit included)."""

from __future__ import annotations

import re

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engine import format as fmt
from tui.state import SessionState
from tui.widgets.panel import Panel


def path_lines(prefix: str, path: str, width: int) -> list[str]:
    """``prefix`` and ``path`` in lines of ``width`` cells that break only after a ``/``: a name
    is never cut (one longer than a line gets a line of its own, folded there)."""
    lines = [prefix]
    for part in re.findall(r"[^/]*/|[^/]+$", path):
        if len(lines[-1]) + 1 + len(part) <= width:
            lines[-1] += (" " if lines[-1] == prefix else "") + part
        else:
            lines.append(part)
    return lines


def recording_note(state: SessionState, width: int | None) -> Text | None:
    if state.recording is None:
        return None
    lines = path_lines("recording to", str(state.recording), max(20, width or 200))
    return Text("\n".join(lines), style="dim", no_wrap=False, overflow="fold")


def render_notices(state: SessionState, newest_first: bool = True, width: int | None = None) -> RenderableType:
    """One notice per row; a long one wraps at word boundaries under its own text (a narrow
    terminal cut warnings mid-word), so the whole message is there to scroll to. Under them,
    where a live session records to."""
    notices = list(state.notices.values())
    note = recording_note(state, width)
    if not notices:
        empty = Text("no warnings", style="dim")
        return Group(empty, note) if note is not None else empty
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
    return Group(grid, note) if note is not None else grid


class NoticesPanel(Panel):
    SECTIONS = ("notices",)
    TITLE = "warnings"

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        return render_notices(state, width=width)

    def title_for(self, state: SessionState) -> str | None:
        errors = sum(1 for n in state.notices.values() if n.severity == "error")
        warnings = len(state.notices) - errors
        if not state.notices:
            return self.TITLE
        return f"warnings ({warnings})" + (f" · errors ({errors})" if errors else "")
