"""Table cells and fitting: the same cells feed the TUI and the headless printer."""

from __future__ import annotations

import pytest
from rich.console import Console

from engine import columns
from engine import events as ev
from tests.tui.synthetic import session_events
from tui import tables
from tui.state import SessionState


def state_of(events: list[ev.Event]) -> SessionState:
    state = SessionState()
    state.apply_all(events)
    return state


def render(table, width: int) -> list[str]:  # noqa: ANN001
    console = Console(width=width, file=None, color_system=None, record=True)
    with console.capture() as capture:
        console.print(table)
    return capture.get().splitlines()


def test_sweep_cells_of_a_merged_level() -> None:
    state = state_of(session_events())
    cells = tables.sweep_cells(state.levels[3], state)
    assert cells["level"] == "16" and cells["ips"] == "1,500" and cells["status"] == "stable"
    assert cells["p50"] == "16.4" and cells["p99"] == "36.1" and cells["client"] == "BOUND"
    assert cells["batch"] == "7.2" and cells["compute"] == "1.60"


def test_running_level_has_no_cost_yet() -> None:
    state = state_of(session_events(finish_levels=1, end=False))
    assert tables.sweep_cells(state.levels[1], state)["cost"] == "-"


def test_fit_drops_optional_columns_then_shortens_headers() -> None:
    state = state_of(session_events())
    rows = [tables.sweep_cells(r, state) for r in state.levels.values()]
    wide, short = tables.fit_columns(columns.SWEEP_SCREEN, rows, 200)
    assert len(wide) == len(columns.SWEEP_SCREEN) and not short
    narrow, short = tables.fit_columns(columns.SWEEP_SCREEN, rows, 79)
    keys = [c.key for c in narrow]
    assert "p95" in keys and "queue" in keys and "compute" in keys and "client" in keys
    assert "cost" not in keys and "errors" not in keys and not short
    tiny, short = tables.fit_columns(columns.SWEEP_SCREEN, rows, 60)
    assert short


def test_fitted_sweep_table_renders_within_its_width() -> None:
    state = state_of(session_events())
    for width in (78, 79, 120):  # 80 columns less the border or the scrollbar
        lines = render(tables.sweep_table(state, width), width)
        assert max(len(line.rstrip()) for line in lines) <= width
        assert not any("…" in line for line in lines), lines


def test_probe_row_compares_with_its_single_gpu_baseline() -> None:
    results = [e for e in session_events() if isinstance(e, ev.ProbeResult)]
    cells = columns.cells(columns.PROBE, results[2])
    assert cells["single"] == "5,000" and cells["multi"] == "17,000" and cells["gpus"] == "4"
    assert cells["speedup"] == "3.40x" and cells["efficiency"] == "85%" and cells["p"] == "<0.001*"


def test_probe_baseline_is_the_one_the_engine_filled_in() -> None:
    """The table reads ProbeResult.baseline_*; it never searches the other rows for one."""
    results = [e for e in session_events() if isinstance(e, ev.ProbeResult)]
    results[1].baseline_samples_per_s = ev.StatSummary(mean=4000.0, ci_low=None, ci_high=None, n=3)
    results[1].speedup = results[1].efficiency = None  # no baseline found: the engine leaves them out
    cells = columns.cells(columns.PROBE, results[1])
    assert cells["single"] == "4,000" and cells["speedup"] == "-" and cells["efficiency"] == "-"


def test_allreduce_cells_against_the_link_limit() -> None:
    result = next(e for e in session_events() if isinstance(e, ev.AllReduceResult))
    row = result.rows[-1]
    cells = columns.cells(columns.ALLREDUCE, (result, row))
    assert cells["size"] == "64 MiB"
    assert cells["limit"] == f"{row.busbw_gbps / 32.0 * 100:.0f}%"
    assert "link limit 32 GB/s" in columns.allreduce_title(result)


@pytest.mark.slow
def test_fixed_lines_align_under_their_header() -> None:
    cols = columns.SWEEP_SCREEN[:3]
    header = columns.header_line(cols)
    line = columns.fixed_line(cols, {"level": "16", "ips": "1500", "p50": "2.90"})
    assert len(header) == len(line)
    assert header.index("infer/s") + len("infer/s") == line.index("1500") + len("1500")
