"""The base of every state-driven panel: re-render only when its sections or its width change
(telemetry alone: at most once a second of the session)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.segment import Segment, Segments
from rich.table import Table
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.state import SessionState

# Telemetry sections (GPU and host samples, up to 10 a second each) redraw a panel at most once
# a second of the session's clock: each drawing is most of the display's CPU, and a second is
# finer than anyone reads a gauge; the samples are all kept (the histories show each one).
TELEMETRY = frozenset({"gpus", "host"})
TELEMETRY_REDRAW_S = 1.0


class Panel(VerticalScroll):
    """A bordered, keyboard-scrollable box whose body is rebuilt from SessionState.

    Subclasses name the state sections they read (SECTIONS) and implement ``render_state``;
    the app's refresh timer calls ``show_state`` a few times a second, which is cheap when
    nothing they read has changed.
    """

    SECTIONS: ClassVar[tuple[str, ...]] = ()
    TITLE: ClassVar[str] = ""
    FOLLOW_TAIL: ClassVar[bool] = False  # keep the newest line in view (logs)
    STICKY_HEAD: ClassVar[bool] = False  # a table's header stays on top while its rows scroll
    reads_height = False  # its drawing fits its own height (a log's tail): redrawn when that changes

    def __init__(self, *, id: str | None = None, classes: str = "") -> None:  # noqa: A002
        super().__init__(id=id, classes=f"panel state-view {classes}".strip())
        self._seen: tuple[int, ...] | None = None
        self._drawn_at: float | None = None  # the session's clock (SessionState.now) when last drawn
        self._key: Hashable | None = None  # drawn_from when last drawn
        self._width = -1
        self._state: SessionState | None = None
        self._height = -1
        self._segments: list[Segment] = []
        self._head: list[Segment] = []
        self._follow_y: int | None = None  # where following put the view (None: the body's end)
        self._drawn_end_y: float | None = None  # the body's end (max_scroll_y) when last drawn
        self._drawn_size: tuple[object, ...] | None = None  # the sizes it was last drawn for
        self._following = False  # the last drawing kept the tail in view

    def _prerender(self, renderable: RenderableType, width: int) -> tuple[list[Segment], int, list[Segment]]:
        """Render once, here, at the body's width: the line count decides whether a layout
        pass is needed, and Textual then only copies the segments. With STICKY_HEAD, a leading
        table's header and rule come back apart, for the docked head."""
        console = self.app.console
        options = console.options.update(width=width, height=None, no_wrap=True, overflow="ellipsis")
        lines = console.render_lines(renderable, options, pad=False)
        first = renderable.renderables[0] if isinstance(renderable, Group) and renderable.renderables else renderable
        sticky = 2 if self.STICKY_HEAD and isinstance(first, Table) and first.show_header and len(lines) > 2 else 0

        def joined(part: list[list[Segment]]) -> list[Segment]:
            segments: list[Segment] = []
            for line in part:  # every line ends in a newline: that is how Textual counts them
                segments.extend(line)
                segments.append(Segment.line())
            return segments

        return joined(lines[sticky:]), len(lines) - sticky, joined(lines[:sticky])

    def compose(self) -> ComposeResult:
        # kept, not queried per drawing: a tick that lands while the app closes finds them removed
        self._head_widget = Static(classes="panel-head")
        self._head_widget.display = False
        self._body_widget = Static(classes="panel-body")
        yield self._head_widget
        yield self._body_widget

    def on_mount(self) -> None:
        self.border_title = self.TITLE
        state = getattr(self.app, "state", None)
        if isinstance(state, SessionState):
            self.show_state(state)

    @property
    def body_width(self) -> int:
        # Room for the scrollbar is kept so that a table does not jump when one appears.
        return max(10, self.size.width - 1)

    def show_state(self, state: SessionState, force: bool = False) -> None:
        self._state = state
        if self.screen not in self.app.screen_stack:
            return  # a view composed ahead, not shown yet: drawn when it is (scrolling needs its layout)
        seen = tuple(state.versions[name] for name in self.SECTIONS)
        width = self.body_width
        if not force and width == self._width and (seen == self._seen or self._telemetry_only_soon(state, seen)):
            return
        key = self.drawn_from(state)
        if not force and width == self._width and key is not None and key == self._key:
            self._seen = seen  # a change that does not reach this picture (a window, to the knee)
            return
        self._seen, self._width, self._key = seen, width, key
        self._drawn_at = state.now
        self._drawn_size = self._size_drawn_for()
        # Following while the view is where following left it (at the end, by default).
        # The end as of the last drawing counts: the layout of what was drawn then may not have
        # come yet (a view's first showing draws, lays out and is resized in quick turns).
        end_y = self.max_scroll_y if self._drawn_end_y is None else min(self.max_scroll_y, self._drawn_end_y)
        following = (self.scroll_y >= end_y if self._follow_y is None
                     else round(self.scroll_y) == min(self._follow_y, round(self.max_scroll_y)))
        self._drawn_end_y = self.max_scroll_y
        segments, height, head = self._prerender(self.render_state(state, width), width)
        if head != self._head:
            self._head = head
            self._head_widget.display = bool(head)
            self._head_widget.update(Segments(head))
        if segments == self._segments:
            pass  # same picture (a new sample that rounds to the same text): no repaint
        else:
            self._segments = segments
            # A layout pass re-arranges the whole screen: only ask for one when the height changed.
            self._body_widget.update(Segments(segments), layout=height != self._height)
            self._height = height
        title = self.title_for(state)
        if title is not None:
            self.border_title = title
        self._following = self.FOLLOW_TAIL and following
        if self._following:
            self._follow_tail(state)

    def _follow_tail(self, state: SessionState) -> None:
        lines = self.follow_lines(state)
        if lines is None:
            self._follow_y = None
            self.call_after_refresh(self.scroll_end, animate=False)
        else:
            self.call_after_refresh(self._follow, lines)

    def _telemetry_only_soon(self, state: SessionState, seen: tuple[int, ...]) -> bool:
        """Only telemetry changed since the last drawing, less than TELEMETRY_REDRAW_S of the
        session's clock ago: not drawn yet (it is kept, and drawn with the next change)."""
        if self._seen is None or self._drawn_at is None or state.now is None:
            return False
        changed = {name for name, now, then in zip(self.SECTIONS, seen, self._seen, strict=True) if now != then}
        return changed <= TELEMETRY and state.now - self._drawn_at < TELEMETRY_REDRAW_S

    def _follow(self, lines: int) -> None:
        """Scroll so that the body's first ``lines`` lines end at the bottom of the view."""
        head = sum(1 for segment in self._head if segment.text == "\n")  # the docked head's lines
        visible = self.scrollable_content_region.height - head
        self._follow_y = max(0, lines - max(1, visible))
        self.scroll_to(y=self._follow_y, animate=False)

    def on_resize(self) -> None:
        # Not when only the content's height changed (a drawing's own layout pass): redrawn then,
        # every panel's picture was drawn twice on a view's first showing.
        if self._state is None:
            return
        if self._size_drawn_for() != self._drawn_size:
            self.show_state(self._state, force=True)
        elif self._following:  # the same picture in a box of another height: its tail kept in view
            self._follow_tail(self._state)

    def _size_drawn_for(self) -> tuple[object, ...]:
        """What of the sizes a drawing depends on: the panel's width and the terminal's size, and
        its own height only for a panel that fits its lines to it (reads_height). A panel whose
        height follows its content is not drawn twice when a drawing's layout makes it taller."""
        return self.size.width, self.size.height if self.reads_height else None, self.app.size

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        raise NotImplementedError

    def drawn_from(self, state: SessionState) -> Hashable | None:
        """What the picture depends on, where that is less than its sections: when it is the
        same as at the last drawing, the panel is not drawn again. None: its sections decide."""
        return None

    def title_for(self, state: SessionState) -> str | None:
        """A border title that carries live numbers; None keeps TITLE."""
        return None

    def follow_lines(self, state: SessionState) -> int | None:
        """With FOLLOW_TAIL: the body's first lines that end in what to keep in view (the running
        row), when that is not the body's end; None: the end."""
        return None
