"""The charts view (key 6): the knee, windows over time, each GPU's history and the host's CPU by
party, from synthetic events with a fixed clock (test inputs, not results). Snapshots at 80x24
and 120x40, live and in replay; update after a deliberate change with --snapshot-update."""

from __future__ import annotations

import pytest

from engine import events as ev
from tests.structs import replace
from tests.tui.synthetic import T0, gpu_sample, session_events
from tests.tui.test_snapshots import fed
from tui.widgets.charts import GpuHistoryPanel


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



def _sample(t: float, util: float) -> ev.GpuSample:
    """One GPU at ``util`` %, ``t`` seconds into the synthetic session."""
    sample = gpu_sample(t, 1, 1.0)
    return replace(sample, gpus=[replace(sample.gpus[0], util_gpu=util)])


async def test_telemetry_alone_redraws_a_chart_once_a_second_of_the_session() -> None:
    events = session_events(n_gpus=1, finish_levels=3, end=False)
    app, run_before = fed(events)
    async with app.run_test(size=(120, 40)) as pilot:
        await run_before(pilot)
        await pilot.press("6")
        await pilot.pause()
        panel = app.screen.query_one(GpuHistoryPanel)
        start = max(e.ts for e in events) - T0 + 1.0  # a second after the last drawing

        def shown() -> str:
            return "".join(segment.text for segment in panel._segments)

        for dt, util, drawn in ((0.0, 41.0, True), (0.2, 42.0, False), (0.5, 43.0, False), (1.05, 44.0, True),
                                (1.1, 45.0, False)):
            app.inbox.append(_sample(start + dt, util))
            app.drain()
            assert (f"util  {util:.0f}%" in shown()) is drawn, (dt, util)
        # anything else the panel reads draws at once, the waiting sample with it
        app.inbox.append(ev.SessionEnded(status="ok", ts=T0 + start + 1.2))
        app.drain()
        assert "util  45%" in shown()
