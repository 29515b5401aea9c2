"""The base of a view's one widget: the body of a screen under the header, replay bar and status
lines (tui/screens/base.py adds those), rendered from what the app holds (tui/host.py)."""

from __future__ import annotations

from textual.containers import Container

from tui.host import ViewHost


class ViewBody(Container):
    """By default a body of panels (`.state-view`, tui/widgets/panel.py), each shown the session's
    state; a body that shows something else overrides ``show``. Called a few times a second while
    events arrive, so it must be cheap when nothing it reads has changed (``force``: redraw anyway,
    as when the view comes back into sight)."""

    def show(self, host: ViewHost, force: bool = False) -> None:
        for widget in self.query(".state-view"):
            widget.show_state(host.state, force)  # type: ignore[attr-defined]  # .state-view widgets all define show_state
