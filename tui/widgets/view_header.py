"""Textual's Header, whose title watcher outlives its title without an error.

Textual's Header updates its HeaderTitle child from watchers of the app's and screen's titles.
When the app exits while a view composed ahead is still being mounted, a watcher can run after
the header's children are gone: Textual catches NoScreen there but not NoMatches, and the error
ends the app's shutdown with a traceback (seen once under two CPU hogs)."""

from __future__ import annotations

from textual.css.query import NoMatches
from textual.dom import NoScreen
from textual.events import Mount
from textual.widgets import Header
from textual.widgets._header import HeaderTitle


class ViewHeader(Header):
    def _on_mount(self, event: Mount) -> None:
        event.prevent_default()  # Header's own _on_mount would watch the titles a second time

        async def set_title() -> None:
            try:
                self.query_one(HeaderTitle).update(self.format_title())
            except (NoScreen, NoMatches):
                pass  # taken down meanwhile: nothing to show the title on

        self.watch(self.app, "title", set_title)
        self.watch(self.app, "sub_title", set_title)
        self.watch(self.screen, "title", set_title)
        self.watch(self.screen, "sub_title", set_title)
