"""The headless sweep tables fit a terminal of 80 columns (they were about 115 and wrapped):
less-needed columns go first, then long headers lose their unit; a log file keeps every column."""

from __future__ import annotations

import io

from rich.console import Console

from tests.tui.synthetic import session_events
from tui.headless import HeadlessPrinter


def _printed(width: int) -> str:
    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=width))
    bus_events = session_events(probe=False)
    for event in bus_events:
        printer(event)
    printer.finish(0, None)
    return out.getvalue()


def _table_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("sweep result")
    return [line for line in lines[start:] if line.strip()][:6]


def test_at_80_columns_the_sweep_tables_fit_and_keep_the_figures_that_matter():
    text = _printed(80)
    rows = [line for line in text.splitlines() if line.startswith(("level  ", "sweep  "))]
    table = _table_lines(text)
    assert rows and all(len(line) <= 80 for line in rows + table), [line for line in rows + table if len(line) > 80]
    header = next(line for line in rows if line.startswith("sweep  "))
    for name in ("level", "infer/s", "p50 ms", "p99 ms", "queue", "compute", "status", "client"):
        assert name in header, header
    assert table[1].split() == ["level", "infer/s", "p50", "ms", "p99", "ms", "queue", "compute", "status", "client"]
    assert len(table[2].split()) == 8  # a cell under each of the 8 columns


def test_a_wide_log_keeps_every_column():
    header = next(line for line in _printed(160).splitlines() if line.startswith("sweep  "))
    for name in ("p95 ms", "queue ms", "compute ms", "avg batch", "errors"):
        assert name in header, header
