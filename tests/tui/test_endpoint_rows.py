"""A level spread over several servers: each endpoint's row in the headless lines and the TUI's
sweep table, and each server's GPUs labelled in the GPU panel (render only)."""

from __future__ import annotations

import io

from rich.console import Console

from tests.engine.record.test_endpoint_rows import _events


def test_headless_and_tui_tables_show_each_endpoint() -> None:
    from tui import tables
    from tui.headless import HeadlessPrinter
    from tui.state import SessionState

    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=160))
    for event in _events():
        printer(event)
    printer.finish(0, None)
    lines = out.getvalue().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("level ") and line.split()[1] == "4")
    assert lines[at + 1].split()[:2] == ["ep1", "200.0"] and lines[at + 2].split()[:2] == ["ep2", "100.0"]
    assert "failed" in lines[at + 2] and "ep2 (http://b:8000): connection refused" in lines[at + 3]
    state = SessionState()
    state.apply_all(_events())
    console = Console(width=120, file=io.StringIO(), color_system=None, record=True)
    console.print(tables.sweep_table(state, 120))
    shown = [line.split() for line in console.export_text().splitlines()]
    firsts = [row[0] for row in shown if row]
    assert firsts[firsts.index("4"):][:3] == ["4", "ep1", "ep2"]
    assert firsts[firsts.index("8"):][:3] == ["8", "ep1", "ep2"]


def test_gpu_panel_labels_each_servers_gpus() -> None:
    from engine.events import GpuReading, GpuSample
    from tui.state import SessionState
    from tui.widgets.gpus import gpu_row

    state = SessionState()
    state.apply(GpuSample(ts=1.0, source="triton", interval_s=2.0, gpus=[
        GpuReading(uuid=f"{ep}:GPU-0", index=None, source="triton", name="NVIDIA H200", util_gpu=50.0, label=f"{ep}:0")
        for ep in ("ep1", "ep2")]))
    rows = [gpu_row(track, 100).plain for track in state.gpus.values()]
    assert [row.split()[0] for row in rows] == ["ep1:0", "ep2:0"]
    assert all(len(row) <= 100 for row in rows)
