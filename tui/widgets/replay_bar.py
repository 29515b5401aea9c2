"""Replay position and controls: play/pause, speed, seek (the replay source read through
tui/host.py's ReplayControls)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from engine import format as fmt
from tui import glyphs
from tui.host import ReplayControls


def replay_line(replay: ReplayControls, width: int) -> Text:
    position = float(replay.position_s or 0.0)
    total = float(replay.duration_s or 0.0)
    paused, speed = replay.paused, replay.speed
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(" REPLAY ", style="reverse bold")
    if replay.finished:  # every event shown: nothing is playing any more
        line.append(" ■ end ", style="bold")
    else:
        line.append(" ❚❚ paused " if paused else " ▶ playing ", style="yellow" if paused else "green")
    line.append("max" if speed is None else f"{speed:g}x", style="bold")
    line.append(f"  {fmt.clock(position)} / {fmt.clock(total)} ")
    bar_w = max(10, width - len(line.plain) - 2)
    line.append(glyphs.bar(position / total if total > 0 else None, bar_w, "━", "─"), style="cyan")
    return line


class ReplayBar(Static):
    """Refreshed by the app's timer, not by events: the position moves between events too."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._last = ""

    def on_mount(self) -> None:
        self.tick()

    def tick(self) -> None:
        replay: ReplayControls | None = getattr(self.app, "replay", None)  # the app's (widgets never import it); it may switch recordings
        if replay is None:
            return
        line = replay_line(replay, self.size.width or 80)
        if line.plain != self._last:
            self._last = line.plain
            self.update(line, layout=False)

    def on_resize(self) -> None:
        self._last = ""
        self.tick()
