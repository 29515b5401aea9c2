"""Snapshots of the main screens, fed synthetic events with a fixed clock (T0-relative times).

Update after a deliberate change with `pytest tests/tui/test_snapshots.py --snapshot-update`
and look at the SVGs (snapshot_report.html shows the differences).
"""

from __future__ import annotations

import pytest

from engine import events as ev
from tests.tui.fakes import FakeControls, FakeReplay, ListSource
from tests.tui.synthetic import session_events
from tui.app import GpuscaleApp

TITLE = "gpuscale-tui · 4x_rtx4080"


def fed(events: list[ev.Event], replay: bool = False):
    """An app with its events queued, and a run_before that folds them in and renders."""
    if replay:
        source = FakeReplay(events, duration_s=64.0)
        source.position_s, source.speed = 30.0, 2.0
        app = GpuscaleApp(replay=source, title=TITLE)
        app.attach(source, replay=source, start=False)
    else:
        source = ListSource(events, linger=False)
        app = GpuscaleApp(controls=FakeControls(), title=TITLE)
        app.attach(source, start=False)

    async def run_before(pilot) -> None:  # noqa: ANN001
        while len(app.view_screens) < len(app.shown_views()):  # the views a key shows are composed ahead
            await pilot.pause(0.05)
        for event in events:
            source.bus.publish(event)
        app.drain()
        await pilot.pause()

    return app, run_before


@pytest.mark.slow
def test_live_mid_sweep_at_80x24(snap_compare) -> None:
    app, run_before = fed(session_events(finish_levels=2, end=False))
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.mark.slow
def test_live_eight_gpus_finished_at_80x24(snap_compare) -> None:
    app, run_before = fed(session_events(n_gpus=8))
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.mark.slow
def test_live_wide_and_tall(snap_compare) -> None:
    app, run_before = fed(session_events(finish_levels=3, end=False))
    assert snap_compare(app, terminal_size=(160, 45), run_before=run_before)


@pytest.mark.slow
def test_sweep_view(snap_compare) -> None:
    app, run_before = fed(session_events(finish_levels=3, end=False))
    assert snap_compare(app, terminal_size=(100, 34), press=["2"], run_before=run_before)


@pytest.mark.slow
def test_probe_view(snap_compare) -> None:
    app, run_before = fed(session_events())
    assert snap_compare(app, terminal_size=(100, 34), press=["3"], run_before=run_before)


@pytest.mark.slow
def test_replay_with_log_view(snap_compare) -> None:
    app, run_before = fed(session_events(), replay=True)
    assert snap_compare(app, terminal_size=(80, 24), press=["4"], run_before=run_before)
