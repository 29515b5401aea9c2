"""Throughput, latency percentiles and server time over the session, one point per window."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from engine import format as fmt
from engine.analysis.stream_split import split_applies
from tui import glyphs
from tui.state import SessionState, WindowPoint, compute_seconds
from tui.widgets.panel import Panel

LABEL_W = 11
SHORT_ROWS = 34  # app.py's VERTICAL_BREAKPOINTS: below this the screen is "-short"
VALUE_W = 9


def breakdown_line(state: SessionState, width: int) -> Text:
    """Where a request's time goes at the current level: server queue, compute, the rest."""
    window = state.windows[-1] if state.windows else None
    server = window.server if window else None
    line = Text(no_wrap=True, overflow="ellipsis")
    if server is None:
        line.append("server time: no statistics yet", style="dim")
        return line
    if server.no_split:  # a decoupled model: no bar of queue, compute and "client+net"
        line.append(server.no_split, style="dim")
        return line
    queue = server.queue or 0.0
    compute = compute_seconds(server) or 0.0
    rest = server.client_minus_server if server.client_minus_server is not None else None
    total = queue + compute + max(rest or 0.0, 0.0)
    figures = Text()
    figures.append(" queue ", style="yellow")
    figures.append(f"{fmt.ms(queue)} ms")
    figures.append(" compute ", style="green")
    figures.append(f"{fmt.ms(compute)} ms")
    figures.append(" client+net ", style="blue")
    if rest is not None and rest < 0:
        # the server's time per request past the client's latency: the two were read over windows
        # that do not line up exactly; a negative time is not a reading
        figures.append("n/a", style="dim")
    else:
        figures.append(f"{fmt.ms(rest)} ms")
    label = "per request "
    # the figures whole, the bar takes what is left (at 80 columns long figures cut client+net)
    bar_w = max(0, min(max(8, width - 64), width - len(label) - len(figures.plain) - 1))
    if bar_w < 4:
        label, bar_w = "", max(0, width - len(figures.plain) - 1)
    line.append(label, style="dim")
    if total > 0 and bar_w >= 4:
        q = int(round(bar_w * queue / total))
        c = int(round(bar_w * compute / total))
        line.append("█" * q, style="yellow")
        line.append("█" * c, style="green")
        line.append("█" * max(0, bar_w - q - c), style="blue")
    line.append_text(figures)
    return line


def series_line(label: str, values: list[float | None], width: int, style: str, unit_ms: bool) -> Text:
    spark_w = max(5, width - LABEL_W - VALUE_W - 1)
    last = next((v for v in reversed(values) if v is not None), None)
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{label:<{LABEL_W}}", style="dim")
    text.append(glyphs.spark(values, spark_w, 0.0, None), style=style)
    text.append(f" {(fmt.ms(last) if unit_ms else fmt.rate(last)):>{VALUE_W - 1}}")
    return text


def render_timeline(points: list[WindowPoint], state: SessionState, width: int, compact: bool = False) -> Text:
    """``compact`` (a short terminal): p50 and p95 give way, so that queue and compute, the rows
    that say where the time goes, stay in view; the tables above carry every percentile."""
    lines = [breakdown_line(state, width)]
    if not points:
        lines.append(Text("no window yet", style="dim"))
        return Text("\n").join(lines)
    streaming = any(p.tokens_per_s is not None for p in points)
    if streaming:  # a stream's rate is of requests (each many responses), as its tables say
        lines.append(series_line("req/s", [p.throughput_rps for p in points], width, "bold green", False))
    else:
        lines.append(series_line("infer/s", [p.throughput_ips for p in points], width, "bold green", False))
    if streaming:  # a streaming model's tokens and first response
        lines.append(series_line("tok/s", [p.tokens_per_s for p in points], width, "bold green", False))
        if not compact:
            lines.append(series_line("TTFT99 ms", [p.ttft_p99 for p in points], width, "magenta", True))
    if not compact:
        lines.append(series_line("p50 ms", [p.p50 for p in points], width, "cyan", True))
        lines.append(series_line("p95 ms", [p.p95 for p in points], width, "yellow", True))
    lines.append(series_line("p99 ms", [p.p99 for p in points], width, "red", True))
    if state.server is None or split_applies(state.server.model_config):  # a stream's: never measured
        lines.append(series_line("queue ms", [p.queue for p in points], width, "yellow", True))
        lines.append(series_line("compute ms", [p.compute for p in points], width, "green", True))
    return Text("\n").join(lines)


class TimelinePanel(Panel):
    SECTIONS = ("windows",)
    TITLE = "over time (one bar per window)"

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        return render_timeline(list(state.timeline), state, width, compact=self.app.size.height < SHORT_ROWS)

    def title_for(self, state: SessionState) -> str | None:
        if not state.timeline:
            return self.TITLE
        first, last = state.timeline[0], state.timeline[-1]
        return f"over time · {fmt.plural(len(state.timeline), 'window')} · {fmt.clock(first.t)}–{fmt.clock(last.t)}"
