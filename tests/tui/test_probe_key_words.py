"""`p` says one thing: on a core install (no torch) that the probe needs its extra, and nothing
is requested; a replay's probe view does not offer `p`, which a replay does not have."""

from __future__ import annotations

import pytest

from engine import errors
from tests.tui.synthetic import session_events
from tests.tui.test_app_pilot import SIZE, live_app, publish, replay_app
from tui.widgets.probe import ProbePanel


@pytest.mark.slow
async def test_p_without_the_probe_extra_says_so_once_and_requests_nothing(monkeypatch) -> None:
    monkeypatch.setitem(errors.EXTRAS, "probe", (("no_such_module_for_this_test", "torch"),))
    app, source, controls = live_app(busy=False)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events(finish_levels=2, end=False))
        app.drain()
        await pilot.press("p")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
    assert "probe" not in controls.calls
    assert messages == ["the training probe needs torch: pip install 'gpuscale-tui[probe]'"], messages


@pytest.mark.slow
async def test_the_replay_probe_view_does_not_offer_p() -> None:
    events = [e for e in session_events() if e.kind not in ("probe_result", "allreduce_result")]
    app, source = replay_app(events)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await pilot.pause()
        texts = [str(panel.render_state(app.state, 80)) for panel in app.screen.query(ProbePanel)]
    assert texts and all("p runs the probe" not in t and "in the recording" in t for t in texts), texts
