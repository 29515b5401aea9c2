"""The study view's scale-out panel in the running app (pilot): hidden until a study with a
scale-out config ends, then its answer line."""

from __future__ import annotations

import pytest

from engine import events as ev
from tests.structs import replace
from tests.tui.fakes import ListSource
from tests.tui.test_study_tui import study_events
from tui.study_app import StudyApp

LINE = ("at p99 <= 50 ms: 2 boxes of 1x H200: 1,900 images/s at $0.00117/1000; "
        "1 box of 2x H200: 1,805 images/s at $0.00123/1000 → scale out")


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_study_view_shows_the_answer_once_the_study_ends():
    events = study_events(finish=True)
    events[-1] = replace(events[-1], scale_answers=[LINE])
    assert isinstance(events[-1], ev.StudyFinished)
    app = StudyApp()
    source = ListSource(events, linger=False)
    app.attach(source, start=False)
    async with app.run_test(size=(220, 70)) as pilot:
        assert not app.screen.query_one("#study-scale").display
        source.start()
        source.join(5)
        shot = ""
        for _ in range(30):  # a loaded box may need more than one frame
            await pilot.pause(0.1)
            shot = app.export_screenshot().replace("&#160;", " ")
            if "→ scale out" in shot:
                break
        assert app.screen.query_one("#study-scale").display
        assert "scale out or scale up" in shot and "2 boxes of 1x H200: 1,900 images/s" in shot
        assert "→ scale out" in shot
