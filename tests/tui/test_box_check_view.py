"""The box check in the TUI: its line in the event log, and its verdict with the worst items in
the training-probe view (next to the topology it explains)."""

from __future__ import annotations

import pytest
from rich.console import Console

from engine import events as ev
from tests.tui.synthetic import session_events
from tests.tui.test_app_pilot import live_app, publish, view_of
from tui.describe import describe, severity


def box_check() -> ev.BoxCheck:
    items = [
        ev.CheckItem(name="pcie link", scope="GPU 2", status="fail", measured="Gen4 x4 under load", expected="Gen4 x16"),
        ev.CheckItem(name="power limit", scope="GPU 0", status="warn", measured="650 W", expected="700 W"),
        ev.CheckItem(name="temperature", scope="GPU 0", status="ok", measured="40 C idle"),
    ]
    return ev.BoxCheck(verdict="no-go", summary="NO-GO: 1 fail, 1 warn, 1 ok: GPU 2 pcie link", items=items,
                       gpus=4, duration_s=21.0)


def plain(renderable) -> str:  # noqa: ANN001
    console = Console(width=100, record=True)
    console.print(renderable)
    return console.export_text()


def test_the_log_line_counts_the_verdicts():
    assert describe(box_check()) == "box check done in 21 s: NO-GO (1 fail, 1 warn, 1 ok)"
    assert severity(box_check()) == "error"


@pytest.mark.slow
async def test_the_probe_view_shows_the_verdict_and_the_worst_items() -> None:
    events = session_events()
    events.insert(1, box_check())
    app, source, _ = live_app()
    async with app.run_test(size=(100, 40)) as pilot:
        publish(source, events)
        app.drain()
        await pilot.press("3")
        assert view_of(app) == "probe"
        panel = app.screen.query_one("#topology")
        text = plain(panel.render_state(app.state, 96))
        lines = text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("box check: NO-GO"))
        assert lines[at + 1].split() == ["fail", "GPU", "2", "pcie", "link:", "Gen4", "x4", "under", "load",
                                         "(expected", "Gen4", "x16)"]
        assert "warn GPU 0 power limit: 650 W (expected 700 W)" in lines[at + 2]
        assert "temperature" not in text  # ok items stay in the report
