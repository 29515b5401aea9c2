"""Two lines at the top: where the sweep is, and what it has found so far."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from engine import format as fmt
from engine.analysis.scaling import cost_per_million_tokens
from engine.analysis.time_left import time_left_parts
from engine.columns import token_word
from engine.modes import mode_of
from tui.state import SessionState

SECTIONS = ("session", "progress", "sweep")


def _short_level(mode: str, level: float) -> str:
    return fmt.level(mode, level) if mode_of(mode).open_loop else f"c={fmt.level(mode, level)}"


class Parts:
    """A status line built from parts; each optional part has a rank, and when the line is too
    wide the highest ranks give way whole, so nothing is cut in the middle of a word."""

    def __init__(self) -> None:
        self.parts: list[tuple[float, Text]] = []

    def append(self, text: str, style: str = "", rank: float = 0) -> None:
        self.parts.append((rank, Text(text, style=style)))

    def fit(self, width: int | None) -> Text:
        parts = list(self.parts)
        while width is not None and sum(len(t) for _, t in parts) > width and any(r for r, _ in parts):
            worst = max(r for r, _ in parts)
            parts = [(r, t) for r, t in parts if r != worst]
        line = Text(no_wrap=True, overflow="ellipsis")
        for _, text in parts:
            line.append_text(text)
        return line


def progress_line(state: SessionState, width: int | None = None) -> Text:
    p = state.progress()
    line = Parts()
    line.append(f" {p.phase.upper()} ", style="reverse bold")
    line.append(" ")
    row = state.levels.get(p.level_index) if p.level_index is not None else None
    if row is not None and p.level_index is not None and not p.sweep_done:
        line.append(f"level {p.level_index + 1}/{p.level_total} {_short_level(row.mode, row.level)}", style="bold")
        if row.trial > 1:  # measured again: `[` and `]` step to each trial, and this says which
            line.append(f" trial {row.trial}", style="bold")
        if p.window_index is not None:
            line.append(f" · window {p.window_index}", rank=3)
            line.append(" · ")
        if row.result is not None:
            line.append(row.status, style="green" if row.status == "stable" else "yellow")
        elif p.warmup:
            line.append("warmup", style="cyan")
        elif p.stable_so_far:
            line.append("stable ✓", style="green")
        elif p.measured_windows:
            line.append("not stable yet", style="yellow")
    elif p.phase in ("probe", "all-reduce") and state.probe:
        last = state.probe[-1]
        line.append(f"{fmt.plural(len(state.probe), 'probe result')}", style="bold")
        line.append(f" · last {last.model} {last.strategy} x{last.world_size}", rank=2)
        line.append(f" {fmt.rate(last.samples_per_s.mean)}/s", rank=2)
        if last.efficiency is not None:
            line.append(f" eff {fmt.percent(last.efficiency)}", style="bold", rank=2)
        line.append(" (3 shows all)", style="dim", rank=4)
    elif p.sweep_done and state.sweep_finished is not None:
        s = state.sweep_finished
        number = f" {state.sweep_number}" if state.past_sweeps else ""
        line.append(f"sweep{number} done: {fmt.plural(s.levels, 'level')}, {s.stable} stable, {s.failed} failed")
    elif p.detail:
        for i, word in enumerate(p.detail.split(" ")):  # a long detail (an error) gives way word by word
            line.append(("" if i == 0 else " ") + word, rank=0.5 + i / 1000 if i else 0)  # the last goes first
    line.append(f" · {fmt.clock(state.elapsed_s)}", style="dim", rank=0 if state.ended is None else 1)
    if p.time_left is not None:  # the headless lines' words: the range gives way before the figure
        likely, bounds = time_left_parts(p.time_left)
        line.append(f" · {likely}", style="bold")
        line.append(f" ({bounds})", style="dim", rank=5)
    return line.fit(width)


def summary_line(state: SessionState, width: int = 200) -> Text:
    """Outcome, server and the best level so far; the server part goes first when space is short."""
    head = Text()
    if state.ended is not None:
        ok = state.ended.status == "ok"
        caveat = ok and bool(state.ended.error)  # finished, with a but ("no level was stable")
        head.append("⚠ finished: " if caveat else "✓ finished " if ok else f"✗ {state.ended.status} ",
                    style="bold yellow" if caveat else "green" if ok else "bold red")
        if state.ended.error:
            head.append(state.ended.error.splitlines()[0] + " ", style="yellow" if caveat else "red")
    server = Text()
    if state.server is not None:
        s = state.server
        variant = f" ({s.config_variant})" if s.config_variant else ""
        server.append(f"{s.model}{variant}", style="bold")
        if s.mps:
            server.append(" MPS", style="cyan")
        server.append(f" @ {s.http_url.removeprefix('http://')}", style="dim")
    elif state.session is not None:
        server.append(f"profile {state.session.profile_name}", style="bold")
    best = Text()
    row = state.best_level()
    if state.sweep_finished is not None and state.levels:  # the answer, as the reports open with it
        best.append(state.answer().line, style="bold")
    elif row is not None and row.result is not None:
        ips = row.result.throughput_ips
        stream = row.result.stream
        # a stream's rate is of requests, as its table says; else of inferences
        rate, unit = (row.result.throughput_rps, "req/s") if stream is not None else (ips, "infer/s")
        best.append(f"best {fmt.rate(rate)} {unit} @ {_short_level(row.mode, row.level)}")
        if state.past_sweeps:
            best.append(f" (sweep {state.sweep_number})")
        if state.gpu_count:
            best.append(f" · {fmt.rate(rate / state.gpu_count)}/GPU")
        cost = state.cost_per_1000(ips) if stream is None else None
        if stream is not None:  # a streaming model's tokens, priced per million of them
            best.append(f" · {fmt.rate(stream.output_tokens_per_s)} {token_word(stream, short=True)}/s")
            per_mtok = cost_per_million_tokens(state.cost_per_hour, stream.output_tokens_per_s)
            if per_mtok is not None:
                best.append(f" · {fmt.money(per_mtok)}/M{'words' if stream.tokens_are_words else 'tok'}", style="bold green")
            elif state.session is not None:
                best.append(" · $/Mtok: set hardware.cost_per_hour", style="dim")
        elif cost is not None:
            best.append(f" · {fmt.money(cost)}/1k img", style="bold green")
        elif state.session is not None:
            best.append(" · $/1k img: set hardware.cost_per_hour", style="dim")
    if server.plain and len(head) + len(server) + len(best) + 2 > width:
        server = Text(server.plain.split(" @ ")[0], style="bold")  # the URL goes first
    if server.plain and len(head) + len(server) + len(best) + 2 > width:
        server = Text()
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append_text(head)
    line.append_text(server)
    if server.plain and best.plain:
        line.append("  ")
    line.append_text(best)
    return line


class StatusBar(Static):
    DEFAULT_CLASSES = "state-view"

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._seen: tuple[int, ...] | None = None
        self._state: SessionState | None = None
        self._shown: Text | None = None

    def on_resize(self) -> None:
        if self._state is not None:
            self.show_state(self._state)

    def on_mount(self) -> None:
        state = getattr(self.app, "state", None)
        if isinstance(state, SessionState):
            self.show_state(state)

    def show_state(self, state: SessionState, force: bool = False) -> None:
        seen = (*(state.versions[name] for name in SECTIONS), self.size.width)
        if not force and seen == self._seen:
            return
        self._seen = seen
        self._state = state
        width = self.size.width or 200
        room = max(10, width - 2)  # the bar's padding
        lines = Text("\n", no_wrap=True, overflow="ellipsis").join([progress_line(state, room), summary_line(state, room)])
        if lines == self._shown:
            return  # most events leave these lines as they were (the clock shows whole seconds)
        self._shown = lines
        self.update(lines, layout=False)  # always two lines: no layout pass
