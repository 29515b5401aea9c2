"""The charts view's panels, from the session's state alone (live and replay alike): the knee,
throughput and latency over time with the level boundaries, each GPU's history, and the host's
CPU by party. Charts are drawn by tui/plots.py; numbers become text in engine/format.py."""

from __future__ import annotations

from collections.abc import Hashable

from rich.console import RenderableType
from rich.text import Text

from engine import format as fmt
from tui import glyphs, plots
from tui.state import GpuTrack, LevelRow, SessionState
from tui.widgets.gpus import note_lines, short_name
from tui.widgets.panel import Panel

TALL_ROWS = 34  # app.py's breakpoint: from here the charts get their taller form
COMPACT_GPUS = 5  # from this many GPUs each one gets a single row


def _rate(v: float) -> str:
    return fmt.rate(v) if v < 10_000 else f"{v / 1000:.0f}k"


def _plot_rows(panel: Panel, tall: int, short: int) -> int:
    return tall if panel.app.size.height >= TALL_ROWS else short


def render_knee(state: SessionState, width: int, rows: int) -> Text:
    """p50 and p99 against throughput, one point per finished level (○: unstable, not sound for a
    decision), latency on a log axis."""
    done = [row for row in state.levels.values() if row.result is not None and row.result.status != "failed"
            and row.result.requests > 0]
    done.sort(key=lambda row: row.level)
    lines = []
    # a streaming model's knee is against its output tokens/s
    streaming = any(row.result.stream is not None for row in done)  # type: ignore[union-attr]  # filtered above

    def x(row: LevelRow) -> float:
        result = row.result
        assert result is not None
        return result.stream.output_tokens_per_s if result.stream is not None else result.throughput_ips

    for key, style in (("p50", "cyan"), ("p99", "red")):
        kept = [row for row in done if getattr(row.result.latency, key) is not None]  # type: ignore[union-attr]  # filtered above
        lines.append(plots.Line(key, [(x(row), getattr(row.result.latency, key))  # type: ignore[union-attr]
                                      for row in kept], style, markers=True,
                                unsound=[row.result.status != "stable" for row in kept]))  # type: ignore[union-attr]
    chart = plots.line_chart(lines, width, rows, log_y=True, y_format=plots.ms_label, x_format=_rate)
    # the axes first, x in the tables' unit; a narrow panel drops "(log)" and spaces, not the unit
    unit = "tokens/s" if streaming else "infer/s"
    wide = width >= len(f"ms (log) vs {unit}  ● p50  ● p99  ○ unstable")
    gap = "  " if wide else " "
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append(f"ms (log) vs {unit}{gap}" if wide else f"ms vs {unit}{gap}", style="dim")
    head.append("● p50", style="cyan")
    head.append(gap)
    head.append("● p99", style="red")
    head.append(f"{gap}○ unstable", style="dim")
    return Text("\n").join([head, *chart.lines])


def render_over_time(state: SessionState, width: int, rows: int) -> Text:
    """Throughput, then p50/p99 (log), per measured window against time, level boundaries marked."""
    points = [p for p in state.timeline if not p.warmup]
    marks: list[tuple[float, str]] = []
    last_level = None
    for p in state.timeline:  # warmup windows included: a level begins with them
        if p.level != last_level:
            marks.append((p.t, fmt.level_value(p.level)))
            last_level = p.level
    x_range = (min(p.t for p in state.timeline), max(p.t for p in state.timeline)) if state.timeline else None
    # a streaming model's windows: output tokens/s, and the time to the first response beside the latency
    streaming = any(p.tokens_per_s is not None for p in points)
    if streaming:
        served = plots.Line("tok/s", [(p.t, p.tokens_per_s) for p in points if p.tokens_per_s is not None], "green")
    else:
        served = plots.Line("infer/s", [(p.t, p.throughput_ips) for p in points], "green")
    tp = plots.line_chart([served], width, rows, y_format=_rate, x_range=x_range, marks=marks)
    latency = [plots.Line("p50", [(p.t, p.p50) for p in points if p.p50 is not None], "cyan"),
               plots.Line("p99", [(p.t, p.p99) for p in points if p.p99 is not None], "red")]
    if streaming:
        latency.append(plots.Line("TTFT p99", [(p.t, p.ttft_p99) for p in points if p.ttft_p99 is not None], "magenta"))
    lat = plots.line_chart(latency, width, rows, log_y=True, y_format=plots.ms_label, x_range=x_range, marks=marks)
    head = Text(f"{served.name} per window · x: seconds, ┴ a level begins", style="dim", no_wrap=True,
                overflow="ellipsis")
    head2 = Text(no_wrap=True, overflow="ellipsis")
    head2.append("ms (log) ", style="dim")
    head2.append("p50", style="cyan")
    head2.append(" ")
    head2.append("p99", style="red")
    if streaming:
        head2.append(" ")
        head2.append("TTFT p99", style="magenta")
    return Text("\n").join([head, *tp.lines[:-1], head2, *lat.lines])


def _last_max(values: list[float | None]) -> tuple[float | None, float | None]:
    numbers = [v for v in values if v is not None]
    return (values[-1] if values else None), (max(numbers) if numbers else None)


def gpu_rows(track: GpuTrack, width: int, graph_rows: int) -> list[Text]:
    """One GPU: a line of last and max values, then ``graph_rows`` rows of utilization history
    (0 rows: the line alone, with a one-row sparkline: the compact form)."""
    r = track.latest
    label = r.label or (f"{r.index}" if r.index is not None else track.uuid[-2:])
    util, util_max = _last_max(list(track.util))
    power, power_max = _last_max(list(track.power))
    mem_max = max((f for f in track.mem_fraction if f is not None), default=None)
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f"{label:>2} ", style="bold")
    line.append(f"{short_name(r.name)[:9]:<9} ")
    if graph_rows == 0:
        spark_w = max(4, width - 62)
        line.append(glyphs.spark(list(track.util), spark_w, 0.0, 100.0), style="green")
        line.append(" ")
    line.append("util ", style="dim")
    line.append(f"{fmt.percent_points(util):>4}")
    line.append(f" max {fmt.percent_points(util_max):>4}", style="dim")
    line.append("  mem ", style="dim")
    line.append(f"{fmt.gib(r.mem_used, 1)}/{fmt.gib(r.mem_total, 0)}G")
    line.append(f" max {fmt.percent(mem_max)}", style="dim")
    line.append("  pwr ", style="dim")
    line.append(f"{fmt.watts(power)}")
    line.append(f" max {fmt.watts(power_max)}", style="dim")
    out = [line]
    if graph_rows:
        graph_w = max(8, width - 9)
        limit = r.power_limit_w or power_max or 1.0
        for i, row in enumerate(plots.area_rows(list(track.util), graph_w, graph_rows, 100.0)):
            text = Text(no_wrap=True, overflow="crop")
            text.append(f"{'util' if i == 0 else '':>7}  ", style="dim")
            text.append(row, style="green")
            out.append(text)
        for name, values, top, style in (("power", list(track.power), limit, "cyan"),
                                         ("memory", list(track.mem_fraction), 1.0, "magenta")):
            text = Text(no_wrap=True, overflow="crop")
            text.append(f"{name:>7}  ", style="dim")
            text.append(plots.area_rows(values, graph_w, 1, top)[0], style=style)
            out.append(text)
    return out


def render_gpus(state: SessionState, width: int, tall: bool) -> Text:
    if not state.gpus:  # why, as the live view's GPU panel says it
        return Text("\n").join(note_lines(state, width))
    compact = len(state.gpus) >= COMPACT_GPUS or not tall
    util_rows = 0 if compact else 2 if len(state.gpus) <= 2 else 1
    rows = [line for track in state.gpus.values() for line in gpu_rows(track, width, util_rows)]
    return Text("\n").join(rows)


def render_host(state: SessionState, width: int) -> Text:
    """The host's CPU by party, in % of the whole machine: ours (this tool and its load workers),
    the embedded server's, and everyone else's (the host's total less those two)."""
    host = state.host
    if host is None:
        return Text("no host readings yet", style="dim")
    spark_w = max(5, width - 16)
    # the sparklines show the last spark_w samples: only those are converted (the history keeps 300)
    total_cpu = list(host.cpu)[-spark_w:]
    ours = [state.own_cpu_of_host(v) for v in list(host.own_cpu)[-spark_w:]]
    server = [state.own_cpu_of_host(v) for v in list(host.server_cpu)[-spark_w:]]
    others: list[float | None] = []
    for total, o, s in zip(total_cpu, ours, server, strict=False):
        others.append(None if total is None else max(0.0, total - (o or 0.0) - (s or 0.0)))
    out = []
    for name, values, style in (("host", total_cpu, "bold"), ("ours", ours, "green"),
                                ("server", server, "yellow"), ("others", others, "red")):
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{name:<7}", style="dim")
        line.append(glyphs.spark(values, spark_w, 0.0, 100.0), style=style)
        last = values[-1] if values else None
        line.append(f" {fmt.percent_points(last) if last is not None else fmt.NA:>6}")
        out.append(line)
    return Text("\n").join(out)


def _fill_rows(panel: Panel, fixed: int, charts: int, tall: int, short: int) -> int:
    """Plot rows for each of ``charts`` charts that fill the panel's height, less its ``fixed``
    lines (heads, axes); never fewer than the compact form's (tall or short terminal)."""
    least = _plot_rows(panel, tall, short)
    height = panel.scrollable_content_region.height
    return max(least, (height - fixed) // charts) if height > 0 else least


class KneePanel(Panel):
    SECTIONS = ("sweep",)
    TITLE = "the knee: latency vs throughput per level"
    reads_height = True  # its chart fills the height the charts' row has

    def _rows(self) -> int:
        return _fill_rows(self, 3, 1, 10, 5)  # the head, the x axis and its labels

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        return render_knee(state, width, self._rows())

    def drawn_from(self, state: SessionState) -> Hashable:
        """Finished levels only: a window of the running level leaves the knee as it was."""
        return (self._rows(), tuple(
            (row.level, r.status, r.requests, r.throughput_ips, r.latency.p50, r.latency.p99)
            for row in state.levels.values() if (r := row.result) is not None))


class OverTimePanel(Panel):
    SECTIONS = ("windows",)
    TITLE = "over time: each measured window"
    reads_height = True  # its two charts share the height the charts' row has

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        # two heads, the throughput chart's axis, the latency chart's axis and its labels (5 lines)
        return render_over_time(state, width, _fill_rows(self, 5, 2, 5, 2))


class GpuHistoryPanel(Panel):
    # session: its end draws the last samples (telemetry alone waits a second); notices: the
    # sampler's word that no GPU will come
    SECTIONS = ("gpus", "session", "notices")
    TITLE = "GPUs: history, last and max"

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        return render_gpus(state, width, self.app.size.height >= TALL_ROWS)


class HostPartiesPanel(Panel):
    SECTIONS = ("host", "session")
    TITLE = "host CPU by party (% of the machine)"

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        return render_host(state, width)
