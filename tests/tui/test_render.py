"""The widgets' text rendering functions, without running an app."""

from __future__ import annotations

from engine import events as ev
from tests.structs import replace
from tests.tui.synthetic import T0, gpu_sample, session_events
from tui.state import SessionState
from tui.widgets.gpus import render_gpus, short_name
from tui.widgets.status import progress_line, summary_line
from tui.widgets.timeline import breakdown_line


def state_of(events: list[ev.Event]) -> SessionState:
    state = SessionState()
    state.apply_all(events)
    return state


def test_one_row_per_gpu_with_eight_and_a_detail_row_with_fewer() -> None:
    eight = state_of([gpu_sample(t, 8, 0.5) for t in range(5)])
    lines = render_gpus(eight, 78, detail=True).plain.splitlines()
    assert len(lines) == 8 and all(line.lstrip().startswith(str(i)) for i, line in enumerate(lines))
    four = state_of([gpu_sample(t, 4, 0.5) for t in range(5)])
    assert len(render_gpus(four, 78, detail=True).plain.splitlines()) == 8  # each GPU + its detail row
    assert len(render_gpus(four, 78, detail=False).plain.splitlines()) == 4


def test_gpu_rows_fit_80_columns_and_show_missing_values_as_missing() -> None:
    reading = ev.GpuReading(uuid="GPU-x", index=0, source="triton", name="NVIDIA H200", util_gpu=None,
                            mem_used=None, mem_total=None, power_w=None)
    state = state_of([ev.GpuSample(gpus=[reading], source="triton", interval_s=2.0, ts=T0)])
    (line,) = render_gpus(state, 78, detail=False).plain.splitlines()
    assert len(line) <= 78
    assert "H200" in line and " 0%" not in line and "0W" not in line and "-" in line


def test_no_gpu_is_said_not_drawn() -> None:
    events = session_events(n_gpus=0, probe=False)
    events = [e for e in events if not isinstance(e, ev.GpuSample)]
    text = render_gpus(state_of(events), 78, detail=False).plain
    assert "no GPU" in text and "util" not in text


def test_short_gpu_names_drop_vendor_words() -> None:
    assert short_name("NVIDIA GeForce RTX 4080") == "RTX 4080"
    assert short_name("NVIDIA H200") == "H200" and short_name(None) == "GPU"


def test_status_lines_during_a_level_and_after() -> None:
    running = state_of(session_events(finish_levels=2, end=False))
    line = progress_line(running).plain
    assert "level 3/4 c=8" in line and "window 1" in line and "not stable yet" in line and "left" in line
    summary = summary_line(running, 80).plain
    assert "best 720.0 infer/s @ c=4" in summary and "$0.000463/1k img" in summary and len(summary) <= 80
    done = state_of(session_events())
    assert summary_line(done, 200).plain.startswith("✓ finished")


def test_status_line_shows_probe_results_as_they_arrive() -> None:
    events = [e for e in session_events(end=False) if not isinstance(e, ev.AllReduceResult)]
    line = progress_line(state_of(events)).plain
    assert "3 probe results" in line and "x4" in line and "eff 85%" in line


def test_queue_versus_compute_breakdown_of_the_current_level() -> None:
    line = breakdown_line(state_of(session_events(finish_levels=2, end=False)), 100).plain
    assert "queue 4.69 ms" in line and "compute 1.60 ms" in line and "client+net 0.40 ms" in line


def test_the_summary_line_says_when_the_embedded_server_runs_under_mps() -> None:
    def with_mps(mps: bool | None) -> str:
        events = [replace(e, mps=mps) if isinstance(e, ev.ServerReady) else e
                  for e in session_events(finish_levels=1, end=False)]
        return summary_line(state_of(events), 200).plain

    assert " MPS @ " in with_mps(True)
    assert "MPS" not in with_mps(False) and "MPS" not in with_mps(None)


def test_status_line_says_the_time_left_in_the_headless_words() -> None:
    """One rule on every surface: the status line's time left is the headless line's range
    (engine/analysis/time_left.py); where the line is short the range gives way, not the figure."""
    from engine.analysis.time_left import time_left_parts

    running = state_of(session_events(finish_levels=2, end=False))
    t = running.time_left()
    assert t is not None and t.high_s is not None
    likely, bounds = time_left_parts(t)
    assert progress_line(running, 200).plain.endswith(f" · {likely} ({bounds})")
    short = progress_line(running, 60).plain
    assert short.endswith(f" · {likely}") and bounds not in short
