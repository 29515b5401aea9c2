"""Drilling into a level (`l`): the levels to choose from with ↑/↓, and the chosen level's
windows, latency percentiles and server time; live and in replay, at 80x24 and 120x40. Synthetic
events with a fixed clock (test inputs, not results)."""

from __future__ import annotations

import pytest

from tests.tui.synthetic import session_events
from tests.tui.test_snapshots import fed
from tui.level_detail import level_rows, windows_of
from tui.state import SessionState


def test_a_levels_windows_are_its_own() -> None:
    state = SessionState()
    events = session_events(n_gpus=2, finish_levels=3, end=False)
    state.apply_all(events)
    rows = level_rows(state)
    assert [r.level for r in rows] == [1, 4, 8, 16]
    for row in rows:
        windows = windows_of(state, row)
        assert windows and {w.level for w in windows} == {row.level}
        assert sum(w.warmup for w in windows) == 1  # each level's one warmup window, and no other level's
    assert len(windows_of(state, rows[0])) == 4 and len(windows_of(state, rows[-1])) == 2  # 16 still running


def test_a_levels_gpu_and_host_trace_are_the_samples_of_its_span() -> None:
    from rich.console import Console

    from engine import events as ev
    from tui.level_detail import render_level

    events = session_events(n_gpus=2, finish_levels=3, end=False)
    state = SessionState()
    state.apply_all(events)
    row = level_rows(state)[0]  # level 1: GPU 0 at 90 x 0.1 = 9 %, GPU 1 at 87 x 0.1 = 8.7 %
    console = Console(width=110, record=True, color_system=None)
    console.print(render_level(state, row, 100))
    text = console.export_text()
    samples = [e for e in events if isinstance(e, ev.GpuSample) and row.started_ts <= e.ts <= (row.finished_ts or 0)]
    mean0 = sum(s.gpus[0].util_gpu for s in samples) / len(samples)
    assert "GPUs and host during the level" in text
    from engine import format as fmt

    assert f"util mean {fmt.percent_points(mean0)}" in text and "GPU 1" in text and "host cpu" in text


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.parametrize("replay", [False, True])
async def test_l_opens_the_levels_and_arrows_choose_one(size: tuple[int, int], replay: bool) -> None:
    app, run_before = fed(session_events(n_gpus=4, finish_levels=3, end=replay) if not replay
                          else session_events(n_gpus=4), replay=replay)
    async with app.run_test(size=size) as pilot:
        await run_before(pilot)
        await pilot.press("l")
        await pilot.pause()
        shot = app.export_screenshot().replace("&#160;", " ")
        assert "levels: ↑/↓ choose" in shot
        assert "▶" in shot and "windows (" in shot and "latency percentiles" in shot and "p99" in shot
        assert "server, per request" in shot and "queue" in shot
        # the last level opens first: running live (its last window's figure), merged in replay
        assert ("running · 1,515 infer/s" if not replay else "stable · 1,500 infer/s") in shot
        await pilot.press("up")
        await pilot.pause()
        shot = app.export_screenshot().replace("&#160;", " ")
        assert "unstable · 1,440 infer/s" in shot  # level 8's own figures, its status said
        await pilot.press("escape")
        await pilot.pause()
        assert "levels: ↑/↓ choose" not in app.export_screenshot().replace("&#160;", " ")


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_level_detail_snapshot_live(snap_compare, size: tuple[int, int]) -> None:
    app, run_before = fed(session_events(n_gpus=4, finish_levels=3, end=False))
    assert snap_compare(app, terminal_size=size, press=["l", "up"], run_before=run_before)


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_level_detail_snapshot_replay(snap_compare, size: tuple[int, int]) -> None:
    app, run_before = fed(session_events(n_gpus=4), replay=True)
    assert snap_compare(app, terminal_size=size, press=["l", "up", "up"], run_before=run_before)
