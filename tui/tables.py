"""The result tables (sweep, training probe, all-reduce) as columns and cells.

One definition serves both outputs: the TUI turns the cells into Rich tables, the headless
printer into fixed-width lines that read well in a log file. No Textual here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.table import Table
from rich.text import Text

from engine import events as ev
from engine.analysis.scaling import scaling_efficiency, speedup
from tui import format as fmt
from tui.state import LevelRow, SessionState, compute_seconds


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    width: int  # fixed width in the headless printer; a minimum in the TUI
    justify: str = "right"
    optional: bool = False  # dropped first when the TUI is narrow
    short: str = ""  # header when even the required columns are too wide

    @property
    def short_header(self) -> str:
        return self.short or self.header


SWEEP_COLUMNS: tuple[Column, ...] = (
    Column("level", "level", 6),
    Column("ips", "infer/s", 8),
    Column("p50", "p50 ms", 7, short="p50"),
    Column("p95", "p95 ms", 7, short="p95"),
    Column("p99", "p99 ms", 7, short="p99"),
    Column("queue", "queue ms", 8, short="queue"),
    Column("compute", "compute ms", 10, short="compute"),
    Column("batch", "avg batch", 9, optional=True, short="batch"),
    Column("status", "status", 11, "left"),
    Column("client", "client", 6, "left"),
    Column("errors", "errors", 6, optional=True),
    Column("cost", "$/1k img", 8, optional=True),
)

PROBE_COLUMNS: tuple[Column, ...] = (
    Column("model", "model", 12, "left"),
    Column("strategy", "strategy", 8, "left", short="strat"),
    Column("scaling", "scaling", 7, "left", optional=True),
    Column("batch", "batch", 5),
    Column("gpus", "GPUs", 4),
    Column("single", "single/s", 9, short="single"),
    Column("multi", "multi/s", 9, short="multi"),
    Column("ci", "95% CI", 9, optional=True),
    Column("speedup", "speedup", 7, short="spd"),
    Column("efficiency", "effic.", 6, short="eff"),
    Column("comm", "comm", 5, optional=True),
    Column("mem", "mem/GPU", 8, short="mem"),
    Column("util", "GPU util", 8, short="util"),
    Column("p", "p-value", 7, optional=True),
)

ALLREDUCE_COLUMNS: tuple[Column, ...] = (
    Column("size", "size", 9),
    Column("time", "time ms", 9, short="ms"),
    Column("algbw", "algbw GB/s", 10),
    Column("busbw", "busbw GB/s", 10),
    Column("limit", "% of link", 9, optional=True),
)

STATUS_STYLE = {"stable": "green", "unstable": "yellow", "failed": "bold red", "running": "cyan", "interrupted": "magenta"}


# --------------------------------------------------------------------------- cells


def sweep_cells(row: LevelRow, state: SessionState) -> dict[str, str]:
    latency = row.latency
    server = row.server
    audit = row.audit
    return {
        "level": fmt.level_label(row.mode, row.level),
        "ips": fmt.rate(row.throughput_ips),
        "p50": fmt.ms(latency.p50 if latency else None),
        "p95": fmt.ms(latency.p95 if latency else None),
        "p99": fmt.ms(latency.p99 if latency else None),
        "queue": fmt.ms(server.queue if server else None),
        "compute": fmt.ms(compute_seconds(server)),
        "batch": fmt.ratio(server.avg_batch_size if server else None, 1),
        "status": row.status,
        "client": fmt.NA if audit is None else ("BOUND" if audit.client_bound else "ok"),
        "errors": str(row.errors),
        "cost": fmt.dollars(state.cost_per_1000(row.throughput_ips)) if row.result else fmt.NA,
    }


def _baseline(result: ev.ProbeResult, results: Sequence[ev.ProbeResult]) -> ev.ProbeResult | None:
    """The world-size-1 run this result scales from: same model, scaling, precision and work."""

    def work(r: ev.ProbeResult) -> int:
        return r.per_device_batch if r.scaling == "weak" else r.global_batch

    candidates = [
        r
        for r in results
        if r.world_size == 1
        and r.model == result.model
        and r.scaling == result.scaling
        and r.precision == result.precision
        and work(r) == work(result)
    ]
    same_strategy = [r for r in candidates if r.strategy == result.strategy]
    pool = same_strategy or candidates
    return pool[-1] if pool else None


def probe_cells(result: ev.ProbeResult, results: Sequence[ev.ProbeResult]) -> dict[str, str]:
    base = _baseline(result, results) if result.world_size > 1 else result
    single = base.samples_per_s.mean if base else None
    multi = result.samples_per_s.mean if result.world_size > 1 else None
    sp, eff = result.speedup, result.efficiency
    if multi is not None and single is not None:  # older producers left these to the reader
        sp = sp if sp is not None else speedup(multi, single)
        eff = eff if eff is not None else scaling_efficiency(multi, single, result.world_size)
    stat = result.samples_per_s
    ci = fmt.NA
    if stat.ci_low is not None and stat.ci_high is not None:
        ci = f"±{fmt.rate((stat.ci_high - stat.ci_low) / 2)}"
    mem = max(result.peak_mem_bytes) if result.peak_mem_bytes else None
    util = sum(result.gpu_util) / len(result.gpu_util) if result.gpu_util else None
    p_value = fmt.NA
    if result.p_value is not None:
        p_value = ("<0.001" if result.p_value < 0.001 else f"{result.p_value:.3f}") + ("*" if result.significant else "")
    return {
        "model": result.model,
        "strategy": result.strategy,
        "scaling": result.scaling,
        "batch": str(result.per_device_batch),
        "gpus": str(result.world_size),
        "single": fmt.rate(single),
        "multi": fmt.rate(multi),
        "ci": ci,
        "speedup": fmt.ratio(sp) + "x" if sp is not None else fmt.NA,
        "efficiency": fmt.percent(eff * 100) if eff is not None else fmt.NA,
        "comm": fmt.percent(result.comm_overhead * 100) if result.comm_overhead is not None else fmt.NA,
        "mem": f"{fmt.gib(mem, 2)}G" if mem is not None else fmt.NA,
        "util": fmt.percent(util),
        "p": p_value,
    }


def allreduce_cells(result: ev.AllReduceResult, row: ev.AllReduceRow) -> dict[str, str]:
    limit = fmt.NA
    if result.link_limit_gbps:
        limit = fmt.percent(row.busbw_gbps / result.link_limit_gbps * 100)
    return {
        "size": fmt.size(row.size_bytes),
        "time": fmt.ms(row.time_s, 3),
        "algbw": fmt.ratio(row.algbw_gbps, 2),
        "busbw": fmt.ratio(row.busbw_gbps, 2),
        "limit": limit,
    }


def allreduce_title(result: ev.AllReduceResult) -> str:
    link = f", {result.link}" if result.link else ""
    limit = f", link limit {result.link_limit_gbps:g} GB/s" if result.link_limit_gbps else ""
    return f"all-reduce, {result.world_size} ranks ({result.backend} on {result.device}{link}{limit})"


WIRE_COLUMNS: tuple[Column, ...] = (
    Column("level", "level", 6),
    Column("status", "status", 11, justify="left"),
    Column("ips", "wire infer/s", 12),
    Column("p50", "p50 ms", 7),
    Column("p99", "p99 ms", 7),
    Column("errors", "errors", 6),
    Column("bound", "client-bound", 12),
)


def wire_cells(level: ev.WireLevel) -> dict[str, str]:
    return {
        "level": f"{level.level:g}",
        "status": level.status,
        "ips": fmt.rate(level.throughput_ips),
        "p50": fmt.ms(level.p50),
        "p99": fmt.ms(level.p99),
        "errors": str(level.errors),
        "bound": "yes" if level.client_bound else "no",
    }


# --------------------------------------------------------------------------- plain lines


def fixed_line(columns: Sequence[Column], cells: dict[str, str]) -> str:
    """One table row as fixed-width text (cells wider than their column push, never cut)."""
    parts = []
    for col in columns:
        text = cells.get(col.key, fmt.NA)
        parts.append(text.ljust(col.width) if col.justify == "left" else text.rjust(col.width))
    return "  ".join(parts).rstrip()


def header_line(columns: Sequence[Column]) -> str:
    return fixed_line(columns, {c.key: c.header for c in columns})


def sweep_columns(state: SessionState) -> tuple[Column, ...]:
    """No cost column when the profile has no price: an empty column says nothing."""
    if state.cost_per_hour > 0:
        return SWEEP_COLUMNS
    return tuple(c for c in SWEEP_COLUMNS if c.key != "cost")


# --------------------------------------------------------------------------- rich tables


def table_width(cols: Sequence[Column], rows: Sequence[dict[str, str]], short: bool) -> int:
    """Cells a table of these columns takes, measured on the actual cells."""
    total = 0
    for c in cols:
        header = c.short_header if short else c.header
        total += max([len(header), *(len(r.get(c.key, "")) for r in rows)]) + 2
    return total - 2  # no padding at the table's edges


def fit_columns(
    columns: Sequence[Column], rows: Sequence[dict[str, str]], width: int | None
) -> tuple[list[Column], bool]:
    """The columns that fit ``width`` cells, measured on the actual cells: optional columns go
    first (last first), then headers shorten (the unit moves to the panel title). Returns the
    columns and whether short headers are needed."""
    kept = list(columns)
    if width is None:
        return kept, False

    def needed(cols: list[Column], short: bool) -> int:
        return table_width(cols, rows, short)

    for col in reversed(columns):
        if needed(kept, False) <= width:
            return kept, False
        if col.optional:
            kept.remove(col)
    return kept, needed(kept, False) > width


def make_table(columns: Sequence[Column], title: str | None = None, short: bool = False) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0), expand=False, title=title, show_edge=False)
    for col in columns:
        header = col.short_header if short else col.header
        table.add_column(header, justify=col.justify, no_wrap=True)  # type: ignore[arg-type]
    return table


CURVE_MIN = 10  # cells: fewer would not show the curve's shape
CURVE_MAX = 40


def curve_width(columns: Sequence[Column], cells: Sequence[dict[str, str]], width: int | None) -> tuple[list[Column], bool, int]:
    """Room for the throughput bars beside the sweep's numbers: the columns that still fit with
    CURVE_MIN cells kept for the bars (optional columns, then long headers give way first), and
    the bars' width (0: no room even then; the table alone)."""
    if width is None:
        return list(columns), False, 0
    kept, short = fit_columns(columns, cells, width - CURVE_MIN - 2)
    used = table_width(kept, cells, short)
    if used <= width - CURVE_MIN - 2:
        return kept, short, min(CURVE_MAX, width - used - 2)
    kept, short = fit_columns(columns, cells, width)
    return kept, short, 0


def curve_cell(row: LevelRow, top: float, width: int) -> Text:
    """One level's throughput as a bar against the highest in view: read top to bottom, the bars
    are the throughput-vs-load curve (flat at the bottom = saturated)."""
    ips = row.throughput_ips
    style = "dim" if row.result is None else STATUS_STYLE.get(row.status, "")
    return Text(fmt.bar(ips / top if ips is not None and top > 0 else None, width, "█", " "), style=style)


def sweep_table(
    state: SessionState, width: int | None = None, rows: Sequence[LevelRow] | None = None, curve: bool = True
) -> Table:
    """The current sweep's table, or ``rows`` of an earlier sweep; with ``curve`` and room, each
    row ends in a bar of its throughput (one scale for every sweep on screen)."""
    rows = list(state.levels.values()) if rows is None else list(rows)
    all_cells = [sweep_cells(row, state) for row in rows]
    if curve:
        columns, short, bar_w = curve_width(sweep_columns(state), all_cells, width)
    else:
        (columns, short), bar_w = fit_columns(sweep_columns(state), all_cells, width), 0
    table = make_table(columns, short=short)
    if bar_w:
        table.add_column("throughput", justify="left", no_wrap=True, width=bar_w)
        shown = [*state.levels.values(), *(r for past in state.past_sweeps for r in past.levels)]
        top = max((r.throughput_ips or 0.0 for r in shown), default=0.0)
    for row, cells in zip(rows, all_cells, strict=True):
        styled = []
        for col in columns:
            text = cells[col.key]
            style = ""
            if col.key == "status":
                style = STATUS_STYLE.get(text, "")
            elif col.key == "client" and text == "BOUND":
                style = "bold yellow"
            elif col.key == "errors" and text != "0":
                style = "red"
            styled.append(Text(text, style=style))
        if bar_w:
            styled.append(curve_cell(row, top, bar_w))
        table.add_row(*styled, style="bold" if row.result is None else "")
    return table


def probe_table(results: Sequence[ev.ProbeResult], width: int | None = None) -> Table:
    all_cells = [probe_cells(result, results) for result in results]
    columns, short = fit_columns(PROBE_COLUMNS, all_cells, width)
    table = make_table(columns, short=short)
    for cells in all_cells:
        table.add_row(*(cells[c.key] for c in columns))
    return table


def allreduce_table(result: ev.AllReduceResult, width: int | None = None) -> Table:
    all_cells = [allreduce_cells(result, row) for row in result.rows]
    columns, short = fit_columns(ALLREDUCE_COLUMNS if result.link_limit_gbps else ALLREDUCE_COLUMNS[:-1], all_cells, width)
    table = make_table(columns, short=short)
    for cells in all_cells:
        table.add_row(*(cells[c.key] for c in columns))
    return table
