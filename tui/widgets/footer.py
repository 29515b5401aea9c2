"""Textual's footer, rebuilt only when the keys it shows change."""

from __future__ import annotations

from collections.abc import Hashable

from textual.screen import Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's Footer recomposes its key widgets (mounting and styling each) whenever the
    screen's bindings are refreshed: on every screen switch, focus change and change of the app's
    busy/live/replaying reactives, mostly to show the same keys again. This one compares what it
    would show with what it shows and recomposes only when they differ."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._shown: Hashable | None = None

    def shown_keys(self) -> Hashable:
        """What compose would draw: each shown binding with its enabled state, the palette key."""
        app = self.app
        return (
            tuple((b.key, app.get_key_display(b), b.description, b.action, enabled, tooltip, b.group)
                  for (_, b, enabled, tooltip) in self.screen.active_bindings.values() if b.show),
            self.show_command_palette and app.ENABLE_COMMAND_PALETTE,
            self.compact,
        )

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        if not self.is_attached:
            return
        keys = self.shown_keys()
        if keys == self._shown:
            return
        self._shown = keys
        await self.recompose()
