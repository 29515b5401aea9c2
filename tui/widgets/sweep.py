"""The sweep: one row per level as it runs and merges, and the current level's windows."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engine.events import WindowResult
from engine.modes import mode_of
from tui import format as fmt
from tui import tables
from tui.format import plural
from tui.state import SessionState, compute_seconds
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

    def title_for(self, state: SessionState) -> str | None:
        if not state.levels:
            return "sweep"
        row = next(iter(state.levels.values()))
        done = sum(1 for r in state.levels.values() if r.result is not None)
        mode = "request rate" if mode_of(row.mode).open_loop else "concurrency"
        number = f" {state.sweep_number}" if state.past_sweeps else ""
        return f"sweep{number} · {mode} · {done}/{row.total} levels · times in ms"


WINDOW_COLUMNS: tuple[tables.Column, ...] = (
    tables.Column("w", "window", 6, short="#"),
    tables.Column("kind", "kind", 7, "left"),
    tables.Column("req", "requests", 8, optional=True),
    tables.Column("ips", "infer/s", 8),
    tables.Column("p50", "p50 ms", 7, short="p50"),
    tables.Column("p95", "p95 ms", 7, short="p95"),
    tables.Column("p99", "p99 ms", 7, short="p99"),
    tables.Column("queue", "queue ms", 8, short="queue"),
    tables.Column("compute", "compute ms", 10, short="compute"),
    tables.Column("stable", "stable", 6, "left"),
)


def window_cells(w: WindowResult) -> dict[str, str]:
    return {
        "w": str(w.index),
        "kind": "warmup" if w.warmup else "measure",
        "req": str(w.requests),
        "ips": fmt.rate(w.throughput_ips),
        "p50": fmt.ms(w.latency.p50),
        "p95": fmt.ms(w.latency.p95),
        "p99": fmt.ms(w.latency.p99),
        "queue": fmt.ms(w.server.queue if w.server else None),
        "compute": fmt.ms(compute_seconds(w.server)),
        "stable": "yes" if w.stable_so_far else "no",
    }


def windows_table(state: SessionState, width: int | None = None) -> Table:
    all_cells = [window_cells(w) for w in state.windows]
    columns, short = tables.fit_columns(WINDOW_COLUMNS, all_cells, width)
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
