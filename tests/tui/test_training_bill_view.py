"""The training bill in the TUI's probe view: the table per world size with its CI, the stop line
(whole, wrapped, never cut), and, for a profile without a dataset size or a price (a recording
made before the key existed), the one line that says what to set."""

from __future__ import annotations

import pytest

from engine import events as ev
from tests.tui.synthetic import session_events
from tests.tui.test_app_pilot import live_app, publish, view_of
from tests.tui.test_box_check_view import plain
from tui.state import SessionState
from tui.widgets.probe import TrainingBillPanel, bill_body


def shown(panel: TrainingBillPanel) -> str:
    """What the panel has on screen, at its own width: the docked head, then the body."""
    return "".join(segment.text for segment in [*panel._head, *panel._segments])


@pytest.mark.slow
async def test_the_probe_view_shows_the_bill_and_where_to_stop() -> None:
    events = session_events(dataset_size=1_281_167)
    app, source, _ = live_app()
    async with app.run_test(size=(100, 40)) as pilot:
        publish(source, events)
        app.drain()
        await pilot.press("3")
        await pilot.pause()
        assert view_of(app) == "probe"
        panel = app.screen.query_one("#bill", TrainingBillPanel)
        text = shown(panel)
        assert "epoch 95% CI" in text and "$/epoch" in text
        rows = [line.split() for line in text.splitlines() if line.startswith("mlp_6.9m  ")]
        assert [r[4] for r in rows] == ["1", "2", "4"]  # the GPUs column
        assert rows[2][-4:] == ["1m15s", "1m15s-1m16s", "$0.0251", "$0.0250-$0.0252"]
        flat = " ".join(text.split())
        assert "mlp_6.9m ddp weak b32: stop at 4 GPUs, the largest config measured" in flat
        assert flat.endswith("measure a larger config to find the limit")  # wrapped, not cut


def test_without_a_dataset_size_the_view_says_what_to_set() -> None:
    state = SessionState()
    state.apply_all(session_events())  # the profile has a price but no probe.dataset_size
    text = plain(bill_body(state, 96))
    assert "set probe.dataset_size (samples per epoch) for the time and $ per epoch" in text
    assert "epoch 95% CI" not in text and "stop at 4 GPUs" in text
    state = SessionState()
    state.apply_all(session_events(cost_per_hour=0.0, dataset_size=50_000))
    text = plain(bill_body(state, 200))
    assert "set hardware.cost_per_hour for the $ per epoch" in text
    assert "epoch 95% CI" in text and "$/epoch" not in text.splitlines()[0]
    empty = SessionState()
    empty.apply_all([e for e in session_events() if not isinstance(e, ev.ProbeResult)])
    assert plain(bill_body(empty, 96)).strip() == "no probe result yet"
