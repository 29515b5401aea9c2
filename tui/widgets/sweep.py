"""The sweep: one row per level as it runs and merges, and the current level's windows."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engine import columns as shared
from engine import format as fmt
from engine.columns import Column, compute_seconds
from engine.events import WindowResult
from engine.format import plural
from engine.modes import mode_of
from tui import tables
from tui.state import SessionState
from tui.widgets.panel import Panel


class SweepPanel(Panel):
    SECTIONS = ("sweep", "session")
    TITLE = "sweep"
    FOLLOW_TAIL = True  # the running level is the last row
    STICKY_HEAD = True

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        if not state.levels:
            return Text("no level measured yet", style="dim")
        if not state.past_sweeps:
            return tables.sweep_table(state, width)
        # Earlier sweeps stay on screen, each under its own label, newest first below this one.
        parts: list[RenderableType] = [tables.sweep_table(state, width)]
        for past in reversed(state.past_sweeps):
            done = sum(1 for r in past.levels if r.result is not None)
            parts.append(Text(f"sweep {past.number} · {plural(done, 'level')} measured", style="bold dim"))
            parts.append(tables.sweep_table(state, width, past.levels))
        return Group(*parts)

    def follow_lines(self, state: SessionState) -> int | None:
        """With earlier sweeps below it, the running level is the current table's last row, not
        the body's end: one line per level and per endpoint row under it (its head is docked
        above the body)."""
        if not state.past_sweeps:
            return None
        return len(state.levels) + sum(len(tables.endpoint_cells(row)) for row in state.levels.values())

    def title_for(self, state: SessionState) -> str | None:
        if not state.levels:
            return "sweep"
        row = next(iter(state.levels.values()))
        done = sum(1 for r in state.levels.values() if r.result is not None)
        mode = "request rate" if mode_of(row.mode).open_loop else "concurrency"
        number = f" {state.sweep_number}" if state.past_sweeps else ""
        return f"sweep{number} · {mode} · {done}/{row.total} levels · times in ms"


WINDOW_COLUMNS: tuple[Column[WindowResult], ...] = (
    Column("w", "window", lambda w: str(w.index), 6, short="#"),
    Column("kind", "kind", lambda w: "warmup" if w.warmup else "measure", 7, "left"),
    Column("req", "requests", lambda w: str(w.requests), 8, optional=True),
    Column("ips", "infer/s", lambda w: fmt.rate(w.throughput_ips), 8),
    Column("p50", "p50 ms", lambda w: fmt.ms(w.latency.p50), 7, short="p50"),
    Column("p95", "p95 ms", lambda w: fmt.ms(w.latency.p95), 7, short="p95"),
    Column("p99", "p99 ms", lambda w: fmt.ms(w.latency.p99), 7, short="p99"),
    Column("queue", "queue ms", lambda w: fmt.ms(w.server.queue if w.server else None), 8, short="queue"),
    Column("compute", "compute ms", lambda w: fmt.ms(compute_seconds(w.server)), 10, short="compute"),
    Column("stable", "stable", lambda w: "yes" if w.stable_so_far else "no", 6, "left"),
)


# a streaming model's windows: requests/s (each request many responses), as the sweep table says
WINDOW_REQUESTS: Column[WindowResult] = Column("ips", "req/s", lambda w: fmt.rate(w.throughput_rps), 8)


def window_cells(w: WindowResult, cols: tuple[Column[WindowResult], ...] = WINDOW_COLUMNS) -> dict[str, str]:
    return shared.cells(cols, w)


def window_columns(state: SessionState) -> tuple[Column[WindowResult], ...]:
    if any(w.stream is not None for w in state.windows):
        return tuple(WINDOW_REQUESTS if c.key == "ips" else c for c in WINDOW_COLUMNS)
    return WINDOW_COLUMNS


def windows_table(state: SessionState, width: int | None = None) -> Table:
    cols = window_columns(state)
    all_cells = [window_cells(w, cols) for w in state.windows]
    columns, short = tables.fit_columns(cols, all_cells, width)
    table = tables.make_table(columns, short=short)
    for w, cells in zip(state.windows, all_cells, strict=True):
        styled = [Text(cells[c.key], style="green" if c.key == "stable" and w.stable_so_far else "") for c in columns]
        table.add_row(*styled, style="dim" if w.warmup else "")
    return table


class WindowsPanel(Panel):
    SECTIONS = ("windows",)
    TITLE = "windows of the current level"
    FOLLOW_TAIL = True
    STICKY_HEAD = True  # the newest window is in view, and so are the column names

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        if not state.windows:
            return Text("no window yet", style="dim")
        return windows_table(state, width)

    def title_for(self, state: SessionState) -> str | None:
        p = state.progress()
        if p.level_label is None:
            return self.TITLE
        return f"windows of level {p.level_label}"
