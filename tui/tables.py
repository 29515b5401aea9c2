"""The shared tables (sweep, training probe, all-reduce, wire check) as Rich tables that fit the
screen. Their columns, headers and cells are engine/columns.py's, the same that the headless
printer, the probe CLI and the reports render; this module only fits them to a width and styles
them. No Textual here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from engine import columns
from engine import events as ev
from engine.analysis.scaling import cost_per_million_tokens
from engine.analysis.stream_split import split_applies
from engine.columns import Column
from tui import glyphs
from tui.state import LevelRow, SessionState

STATUS_STYLE = {"stable": "green", "unstable": "yellow", "contended": "yellow", "failed": "bold red", "running": "cyan", "interrupted": "magenta"}


def level_figures(row: LevelRow, state: SessionState) -> columns.LevelFigures:
    """A live row as the shared sweep columns read it: the merged result, else the latest window."""
    return columns.LevelFigures(
        mode=row.mode, level=row.level, status=row.status, throughput_ips=row.throughput_ips,
        throughput_rps=row.throughput_rps, latency=row.latency, server=row.server, audit=row.audit,
        errors=row.errors, cost_per_1000=state.cost_per_1000(row.throughput_ips) if row.result else None,
        stream=row.stream, sequence=row.sequence,
        cost_per_million_tokens=cost_per_million_tokens(state.cost_per_hour, row.result.stream.output_tokens_per_s)
        if row.result and row.result.stream else None,
        cache=row.result.cache if row.result else None,
    )


def sweep_cells(row: LevelRow, state: SessionState) -> dict[str, str]:
    return columns.cells(columns.SWEEP, level_figures(row, state))


def endpoint_cells(row: LevelRow) -> list[dict[str, str]]:
    """A level spread over several servers: each endpoint's row, under the level's."""
    if row.result is None:
        return []
    return [columns.cells(columns.SWEEP, f) for f in columns.endpoint_figures(row.result)]


def sweep_columns(state: SessionState) -> tuple[Column[columns.LevelFigures], ...]:
    """The screen's sweep columns, less the cost where the profile has no price; a streaming
    sweep's TTFT, ITL and tokens/s where its levels have them."""
    shown = columns.without_cost(columns.SWEEP_SCREEN, state.cost_per_hour)
    done = [row.result for row in state.levels.values() if row.result is not None]
    # a decoupled Triton model's split, or streams whose server kept no statistics (OpenAI's API)
    unsplit_streams = bool(done) and all(r.stream is not None and r.server is None for r in done)
    if (state.server is not None and not split_applies(state.server.model_config)) or unsplit_streams:
        shown = columns.without_split(shown)
    # p95 is the figure a narrow screen spares (after the optional ones, before any unit):
    # p50 and p99 bound it, and the level view shows every percentile
    shown = tuple(replace(c, optional=True) if c.key == "p95" else c for c in shown)
    if any(row.sequence is not None for row in state.levels.values()):  # a sequence model's step split
        shown = columns.with_sequence(shown)
    streaming = any(row.stream is not None for row in state.levels.values())
    if not streaming:
        return shown
    # a stream's rate is of requests (each many responses), not of inferences: req/s, as it is
    shown = tuple(REQUESTS if c.key == "ips" else c for c in shown)
    shown = columns.with_stream(shown, priced=state.cost_per_hour > 0)
    # the server's cache where a level read it (an LLM server's /metrics)
    return columns.with_cache(shown) if any(r.cache is not None for r in done) else shown


# A streaming sweep's many columns do not all fit 80 even with short headers: these give way last
# (the p99s, tok/s, status and errors stay; queue and compute, or the split column that stands for
# them, are on the over-time rows beside), so that no figure is cut.
STREAM_SPARE = frozenset({"p50", "ttft_p50", "queue", "compute", "split"})


def spare_last(state: SessionState) -> frozenset[str]:
    """The columns fit_columns drops after every unit-first header has shortened."""
    return STREAM_SPARE if any(row.stream is not None for row in state.levels.values()) else frozenset()


REQUESTS = replace(*columns.select(columns.SWEEP, ("rps",)), optional=False)


# --------------------------------------------------------------------------- rich tables


def table_width(cols: Sequence[Column[Any]], rows: Sequence[dict[str, str]], short: bool) -> int:
    """Cells a table of these columns takes, measured on the actual cells."""
    total = 0
    for c in cols:
        header = c.short_header if short else c.header
        total += max([len(header), *(len(r.get(c.key, "")) for r in rows)]) + 2
    return total - 2  # no padding at the table's edges


# Where room is short these headers give their unit first: their names say latency, and the panel
# title says "times in ms"; queue and compute keep "ms" longer (without it they read as counts).
UNIT_FIRST = frozenset({"p50", "p90", "p95", "p99", "mean", "ttft_p50", "ttft_p99", "itl_p50", "itl_p99"})


def fit_columns(
    columns: Sequence[Column[Any]], rows: Sequence[dict[str, str]], width: int | None,
    last: frozenset[str] = frozenset(),
) -> tuple[list[Column[Any]], bool]:
    """The columns that fit ``width`` cells, measured on the actual cells: optional columns go
    first (last first), then the percentiles' headers lose their unit (UNIT_FIRST), then the
    columns named in ``last`` go (last first), then every header shortens (the unit moves to the
    panel title). Returns the columns and whether the short headers are needed."""
    kept = list(columns)
    if width is None:
        return kept, False

    def needed(cols: list[Column[Any]], short: bool) -> int:
        return table_width(cols, rows, short)

    for col in reversed(columns):
        if needed(kept, False) <= width:
            return kept, False
        if col.optional:
            kept.remove(col)
    if needed(kept, False) > width:
        kept = [replace(c, header=c.short) if c.key in UNIT_FIRST and c.short else c for c in kept]
    for col in reversed(list(kept)):
        if needed(kept, False) <= width:
            break
        if col.key in last:
            kept.remove(col)
    return kept, needed(kept, False) > width


def make_table(columns: Sequence[Column[Any]], title: str | None = None, short: bool = False) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0), expand=False, title=title, show_edge=False)
    for col in columns:
        header = col.short_header if short else col.header
        table.add_column(header, justify=col.justify, no_wrap=True)
    return table


CURVE_MIN = 8  # cells (of eighths each): fewer would not show the curve's shape
CURVE_WHOLE = len("throughput")  # cells that show the bars' header whole: tried first
CURVE_MAX = 40


def curve_width(columns: Sequence[Column[Any]], cells: Sequence[dict[str, str]], width: int | None,
                last: frozenset[str] = frozenset()) -> tuple[list[Column[Any]], bool, int]:
    """Room for the throughput bars beside the sweep's numbers: the columns that still fit with
    CURVE_WHOLE, else CURVE_MIN, cells kept for the bars (optional columns, then the percentiles'
    units give way first), and the bars' width (0: no room; the table alone). Units come before
    the bars: where the bars would cost queue's and compute's "ms", the table goes without bars."""
    if width is None:
        return list(columns), False, 0
    alone, alone_short = fit_columns(columns, cells, width, last)
    for least in (CURVE_WHOLE, CURVE_MIN):
        room = width - least - 2
        kept, short = fit_columns(columns, cells, room, last)
        used = table_width(kept, cells, short)
        if used <= room and (not short or alone_short):
            return kept, short, min(CURVE_MAX, width - used - 2)
    return alone, alone_short, 0


def curve_cell(row: LevelRow, top: float, width: int) -> Text:
    """One level's throughput as a bar against the highest in view: read top to bottom, the bars
    are the throughput-vs-load curve (flat at the bottom = saturated)."""
    ips = row.throughput_ips
    style = "dim" if row.result is None else STATUS_STYLE.get(row.status, "")
    return Text(glyphs.bar(ips / top if ips is not None and top > 0 else None, width, "█", " "), style=style)


def sweep_table(
    state: SessionState, width: int | None = None, rows: Sequence[LevelRow] | None = None, curve: bool = True
) -> Table:
    """The current sweep's table, or ``rows`` of an earlier sweep; with ``curve`` and room, each
    row ends in a bar of its throughput. Every sweep on screen gets the same columns and bars of
    one width and one scale: they are fitted to the cells of them all."""
    rows = list(state.levels.values()) if rows is None else list(rows)
    all_cells = [sweep_cells(row, state) for row in rows]
    under = [endpoint_cells(row) for row in rows]  # several servers: their rows under each level
    shown = [*state.levels.values(), *(r for past in state.past_sweeps for r in past.levels)]
    fit_cells = [sweep_cells(row, state) for row in shown] if state.past_sweeps else all_cells
    fit_cells = [*fit_cells, *(c for cells in under for c in cells)]
    if curve:
        columns, short, bar_w = curve_width(sweep_columns(state), fit_cells, width, spare_last(state))
    else:
        (columns, short), bar_w = fit_columns(sweep_columns(state), fit_cells, width, spare_last(state)), 0
    table = make_table(columns, short=short)
    if bar_w:
        table.add_column("throughput", justify="left", no_wrap=True, width=bar_w)
        top = max((r.throughput_ips or 0.0 for r in shown), default=0.0)
    for row, cells, endpoint_rows in zip(rows, all_cells, under, strict=True):
        styled = _styled(columns, cells)
        if bar_w:
            styled.append(curve_cell(row, top, bar_w))
        table.add_row(*styled, style="bold" if row.result is None else "")
        for ep_cells in endpoint_rows:
            table.add_row(*_styled(columns, ep_cells), *([Text("")] if bar_w else []), style="dim")
    return table


def _styled(cols: Sequence[Column[Any]], cells: dict[str, str]) -> list[Text]:
    styled = []
    for col in cols:
        text = cells[col.key]
        style = ""
        if col.key == "status":
            style = STATUS_STYLE.get(text, "")
        elif col.key == "client" and text == "BOUND":
            style = "bold yellow"
        elif col.key == "errors" and text != "0":
            style = "red"
        styled.append(Text(text, style=style))
    return styled


def fitted_table(cols: Sequence[Column[Any]], items: Sequence[Any], width: int | None = None) -> Table:
    """A shared table's rows in the columns that fit ``width`` (see fit_columns)."""
    all_cells = [columns.cells(cols, item) for item in items]
    kept, short = fit_columns(cols, all_cells, width)
    table = make_table(kept, short=short)
    for cells in all_cells:
        table.add_row(*(cells[c.key] for c in kept))
    return table


def probe_table(results: Sequence[ev.ProbeResult], width: int | None = None) -> Table:
    return fitted_table(columns.PROBE, results, width)


def allreduce_table(result: ev.AllReduceResult, width: int | None = None) -> Table:
    return fitted_table(columns.allreduce_columns(result), columns.allreduce_items(result), width)
