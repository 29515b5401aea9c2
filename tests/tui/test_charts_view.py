"""The charts view (key 6): the knee, windows over time, each GPU's history and the host's CPU by
party, from synthetic events with a fixed clock (test inputs, not results). Snapshots at 80x24
and 120x40, live and in replay; update after a deliberate change with --snapshot-update."""

from __future__ import annotations

import pytest

from tests.tui.synthetic import session_events
from tests.tui.test_snapshots import fed


@pytest.mark.slow
def test_charts_live_mid_sweep_eight_gpus_at_80x24(snap_compare) -> None:
    app, run_before = fed(session_events(n_gpus=8, finish_levels=3, end=False))
    assert snap_compare(app, terminal_size=(80, 24), press=["6"], run_before=run_before)


@pytest.mark.slow
def test_charts_live_four_gpus_at_120x40(snap_compare) -> None:
    app, run_before = fed(session_events(n_gpus=4, finish_levels=3, end=False))
    assert snap_compare(app, terminal_size=(120, 40), press=["6"], run_before=run_before)


@pytest.mark.slow
def test_charts_in_replay_at_80x24(snap_compare) -> None:
    app, run_before = fed(session_events(n_gpus=2), replay=True)
    assert snap_compare(app, terminal_size=(80, 24), press=["6"], run_before=run_before)


@pytest.mark.slow
def test_charts_in_replay_at_120x40(snap_compare) -> None:
    app, run_before = fed(session_events(n_gpus=2), replay=True)
    assert snap_compare(app, terminal_size=(120, 40), press=["6"], run_before=run_before)


@pytest.mark.parametrize("size, gpus", [((80, 24), 8), ((120, 40), 4)])
async def test_the_charts_say_what_they_show_at_both_sizes(size: tuple[int, int], gpus: int) -> None:
    app, run_before = fed(session_events(n_gpus=gpus, finish_levels=3, end=False))
    async with app.run_test(size=size) as pilot:
        await run_before(pilot)
        await pilot.press("6")
        await pilot.pause()
        text = app.export_screenshot().replace("&#160;", " ")
    for words in ("the knee", "p50", "p99", "unstable", "over time", "GPUs: history"):
        assert words in text, words
    assert "┴" in text  # the level boundaries on the time axis
    assert text.count("RTX 4080") == gpus  # every GPU in view, 8 included at 80x24
    assert "max" in text
