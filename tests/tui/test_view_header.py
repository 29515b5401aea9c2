"""The header's title watcher, run after its title is gone (an app exiting while a view composed
ahead is still mounting), does not end the app with an error."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Header
from textual.widgets._header import HeaderTitle

from tui.widgets.view_header import ViewHeader


class _Titled(App[None]):
    def __init__(self, header: type[Header]) -> None:
        super().__init__()
        self.header = header

    def compose(self) -> ComposeResult:
        yield self.header()


async def _title_changed_after_the_title_went(header: type[Header]) -> BaseException | None:
    app = _Titled(header)
    async with app.run_test() as pilot:
        await app.query_one(HeaderTitle).remove()
        app.title = "a new title"
        await pilot.pause()
    return app._exception


@pytest.mark.parametrize("header, fails", [(ViewHeader, False), (Header, True)])
async def test_a_title_change_after_the_title_went(header: type[Header], fails: bool) -> None:
    try:
        error = await _title_changed_after_the_title_went(header)
    except Exception as exc:  # noqa: BLE001 - Textual's Header raises it out of run_test
        error = exc
    assert (error is not None) is fails, error  # Textual's own: the anchor that shows the race is real


async def test_the_view_header_still_shows_the_title() -> None:
    app = _Titled(ViewHeader)
    async with app.run_test() as pilot:
        app.title = "gpuscale-tui · here"
        await pilot.pause()
        assert "gpuscale-tui · here" in str(app.query_one(HeaderTitle).render())
