"""Small modal questions: quit a running session, export format, which recording to open."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from engine.record.exporters import EXPORTERS

EXPORT_FORMATS = tuple((name, exporter.description) for name, exporter in EXPORTERS.items())


QuitAnswer = Literal["stay", "quit", "interrupt"]  # interrupt: ctrl+c again, stop at once (exit 130)


class ConfirmQuit(ModalScreen[QuitAnswer]):
    """``running``: what the session is doing (its phase: sweep, probe ...); None: it is idle.
    Docked at the bottom, over the footer, where the eye goes for keys."""

    BINDINGS = [
        Binding("y,enter", "answer('quit')", "Quit"),
        Binding("n,escape,q", "answer('stay')", "Stay"),
        Binding("ctrl+c", "answer('interrupt')", "Stop now"),  # the app's ctrl+c comes first where it has one
    ]

    def __init__(self, running: str | None = None, stops_server: bool = True) -> None:
        super().__init__()
        self.running = running
        self.stops_server = stops_server  # an embedded server stops with the app; a remote one goes on

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            if self.running:
                yield Label(f"Running: {self.running}. Stop it and quit?")
            else:
                yield Label("The session is idle. Quit?" + (" Its server stops." if self.stops_server else ""))
            yield Label("The recording is finalised either way.", classes="dim")
            keys = "[b]y[/b] quit    [b]n[/b] stay" if not self.running else "[b]y[/b] stop and quit    [b]n[/b] keep it running"
            yield Label(f"{keys}    [b]ctrl+c[/b] stop now")

    def on_mount(self) -> None:
        self.query_one(".dialog").border_title = "quit"

    def action_answer(self, answer: QuitAnswer) -> None:
        self.dismiss(answer)


class ExportDialog(ModalScreen[str | None]):
    BINDINGS = [Binding("escape,q", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield OptionList(*(Option(f"{name:<5} {text}", id=name) for name, text in EXPORT_FORMATS))
            yield Label("enter exports beside the recording · esc cancels", classes="dim")

    def on_mount(self) -> None:
        self.query_one(".dialog").border_title = "export the recording"
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        self.dismiss(message.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class OpenRecordingDialog(ModalScreen[Path | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, candidates: list[Path]) -> None:
        super().__init__()
        self.candidates = candidates

    def compose(self) -> ComposeResult:
        names = [str(p) for p in self.candidates]
        with Vertical(classes="dialog"):
            yield Label("Path of a recording (tab completes the newest match):")
            yield Input(
                value=names[0] if names else "",
                placeholder="recordings/....sqlite",
                suggester=SuggestFromList(names, case_sensitive=True),
            )
            yield Label("enter opens · esc cancels", classes="dim")

    def on_mount(self) -> None:
        self.query_one(".dialog").border_title = "open a recording"
        self.query_one(Input).focus()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        text = message.value.strip()
        self.dismiss(Path(text).expanduser() if text else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
