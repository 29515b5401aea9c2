"""One level, drilled into: the levels to choose from, then the chosen level's figures, its
windows, its latency percentiles on a log scale, where a request's time went on the server, and
each GPU's utilization and the host's CPU over its span.
Pure functions of SessionState (testable without Textual); numbers become text in engine/format."""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engine import events as ev
from engine import format as fmt
from engine.analysis.percentiles import histogram_of
from engine.columns import token_word
from tui import glyphs
from tui.state import LevelRow, SessionState, WindowPoint, compute_seconds

PERCENTILES = (("min", "min"), ("p50", "p50"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"), ("max", "max"))


def level_rows(state: SessionState) -> list[LevelRow]:
    """The current sweep's levels in the order they ran."""
    return list(state.levels.values())


def level_list(rows: list[LevelRow], selected: int) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, row in enumerate(rows):
        mark = "▶ " if i == selected else "  "
        style = "reverse" if i == selected else ("dim" if row.status == "running" else "")
        tp = fmt.rate(row.throughput_ips) if row.throughput_ips is not None else fmt.NA
        out.append(f"{mark}{fmt.level(row.mode, row.level):>6} {row.status:<9} {tp:>9}/s", style=style)
        if i < len(rows) - 1:
            out.append("\n")
    return out


def windows_of(state: SessionState, row: LevelRow) -> list[WindowPoint]:
    """The level's windows on the session timeline: its level and its span."""
    start = state.rel(row.started_ts)
    end = state.rel(row.finished_ts) if row.finished_ts is not None else math.inf
    return [p for p in state.timeline if p.level == row.level and start <= p.t <= end + 1e-6]


def windows_title(count: int, shown: int) -> str:
    """"windows (4)" when all are listed, "windows (20, the last 12 shown)" when not."""
    return f"windows ({count})" if count <= shown else f"windows ({count}, the last {shown} shown)"


def _distribution(latency: ev.LatencyStats, width: int) -> Text:
    """The level's percentiles as bars on a log scale from min to max (the screen has percentiles,
    not every sample: a ladder of them, not a histogram of counts)."""
    values = [(name, getattr(latency, attr)) for name, attr in PERCENTILES]
    known = [v for _n, v in values if v is not None and v > 0]
    out = Text(no_wrap=True, overflow="ellipsis")
    if not known:
        out.append("no latency yet", style="dim")
        return out
    lo, hi = math.log10(min(known)), math.log10(max(known))
    span = hi - lo or 1.0
    bar_w = max(8, width - 16)
    lines = []
    for name, v in values:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{name:>4} ", style="dim")
        frac = None if v is None or v <= 0 else 0.05 + 0.95 * (math.log10(v) - lo) / span
        line.append(glyphs.bar(frac, bar_w), style="red" if name == "p99" else "cyan")
        line.append(f" {fmt.ms(v):>8} ms")
        lines.append(line)
    return Text("\n").join(lines)


HISTOGRAM_BINS = 10


def _histogram(latency: ev.LatencyStats, width: int) -> Text | None:
    """The level's recorded distribution (LatencyStats.histogram) as counts in bins of equal width
    on a log scale; None where the level kept none (a recording made before they were)."""
    if latency.histogram is None:
        return None
    try:
        bins = histogram_of(latency.histogram).log_bins(HISTOGRAM_BINS)
    except ValueError:  # a histogram this version cannot read: the percentiles still stand
        return None
    if not bins:
        return None
    most = max(count for _lo, _hi, count in bins) or 1
    bar_w = max(8, width - 30)
    lines = []
    for lo, hi, count in bins:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{fmt.ms(lo / 1e9):>8}-{fmt.ms(hi / 1e9):<8} ms ", style="dim")
        line.append(glyphs.bar(count / most, bar_w), style="cyan")
        line.append(f" {count:,}")
        lines.append(line)
    return Text("\n").join(lines)


def _server(server: ev.ServerBreakdown | None) -> Text:
    if server is None:
        return Text("the server reported no statistics for this level", style="dim")
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("avg batch ", style="dim")
    out.append(fmt.batch(server.avg_batch_size) + "  ")
    if server.no_split:  # a decoupled model: "not measured", never a misleading "outside server"
        out.append(server.no_split, style="dim")
        return out
    parts = [("queue", server.queue), ("compute", compute_seconds(server)), ("server", server.server_total),
             ("outside server", server.client_minus_server)]
    for name, value in parts:
        out.append(f"{name} ", style="dim")
        out.append(f"{fmt.ms(value)} ms  ")
    return out


def _in_span(times: object, values: object, start: float, end: float) -> list[float | None]:
    return [v for t, v in zip(times, values, strict=False) if start <= t <= end]  # type: ignore[call-overload]  # deques of one length


def _traces(state: SessionState, row: LevelRow, width: int) -> Text:
    """Each GPU's utilization and power, and the host's CPU by party, over the level's span."""
    end = row.finished_ts if row.finished_ts is not None else math.inf
    spark_w = max(8, width - 40)
    lines = []
    for track in state.gpus.values():
        util = _in_span(track.times, track.util, row.started_ts, end)
        power = _in_span(track.times, track.power, row.started_ts, end)
        if not util:
            continue
        numbers = [u for u in util if u is not None]
        line = Text(no_wrap=True, overflow="ellipsis")
        r = track.latest
        label = r.label or (str(r.index) if r.index is not None else track.uuid[-4:])
        line.append(f"GPU {label:<4} ", style="bold")
        line.append(glyphs.spark(util, spark_w, 0.0, 100.0), style="green")
        line.append(f" util mean {fmt.percent_points(sum(numbers) / len(numbers) if numbers else None)}")
        watts = [p for p in power if p is not None]
        line.append(f" · {fmt.watts(sum(watts) / len(watts) if watts else None)}", style="cyan")
        lines.append(line)
    host = state.host
    if host is not None:
        for name, values in (("host cpu", host.cpu), ("ours", [state.own_cpu_of_host(v) for v in host.own_cpu]),
                             ("server", [state.own_cpu_of_host(v) for v in host.server_cpu])):
            part = _in_span(host.times, values, row.started_ts, end)
            numbers = [v for v in part if v is not None]
            if not numbers:
                continue
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"{name:<9}", style="dim")
            line.append(glyphs.spark(part, spark_w, 0.0, 100.0), style="yellow")
            line.append(f" mean {fmt.percent_points(sum(numbers) / len(numbers))} of the machine")
            lines.append(line)
    return Text("\n").join(lines) if lines else Text("no GPU or host samples in this level's span", style="dim")


def _percentile_line(latency: ev.LatencyStats) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    for name, attr in PERCENTILES:
        out.append(f"{name} ", style="dim")
        out.append(f"{fmt.ms(getattr(latency, attr))}  ", style="red" if name == "p99" else "")
    out.append("ms", style="dim")
    return out


def _stream_lines(stream: ev.StreamStats) -> Text:
    """A streaming level's time to the first response and gaps between responses, percentiles in ms."""
    lines = []
    for label, stats in (("TTFT", stream.ttft), ("ITL ", stream.itl)):
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{label} ", style="bold")
        for name in ("p50", "p90", "p99", "max"):
            line.append(f"{name} ", style="dim")
            line.append(f"{fmt.ms(getattr(stats, name))}  ", style="red" if name == "p99" else "")
        line.append("ms", style="dim")
        if label == "ITL " and stream.itl_note:
            line = Text(f"ITL  {stream.itl_note}", no_wrap=True, overflow="ellipsis")
        lines.append(line)
    tokens = stream.tokens_per_request if stream.tokens_per_request is not None else stream.responses_per_request
    word = token_word(stream)
    said = f"{tokens:.1f} {word} and {stream.responses_per_request:.1f} responses per request"
    if stream.input_tokens_per_request is not None:  # the prompt's, as the server counted it (OpenAI's usage)
        said += f"; {stream.input_tokens_per_request:.1f} input {word}"
    if stream.tokens_are_words:
        said += " (words, not tokens: the server reported no usage)"
    lines.append(Text(said, style="dim"))
    return Text("\n").join(lines)


def render_level(state: SessionState, row: LevelRow, width: int, compact: bool = False) -> RenderableType:
    """``compact`` (a short terminal): the last 3 windows and the percentiles on one line, so that
    the server's figures stay in the first screen."""
    latency = row.latency
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append(f"{fmt.level(row.mode, row.level)} ", style="bold")
    stream = row.stream
    rate = f"{fmt.rate(row.throughput_rps)} req/s" if stream is not None else f"{fmt.rate(row.throughput_ips)} infer/s"
    head.append(f"{row.status} · {rate} · errors {row.errors:,} · "
                f"{fmt.duration(row.duration_s)} · {fmt.plural(row.workers, 'worker')}")
    if stream is not None:  # a streaming model's: its output tokens
        head.append(f" · {fmt.rate(stream.output_tokens_per_s)} {token_word(stream, short=True)}/s", style="bold green")
    windows = windows_of(state, row)
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="dim")
    for name in ("t", "", "req/s" if stream is not None else "infer/s", "p50 ms", "p99 ms", "queue ms", "compute ms"):
        table.add_column(name, justify="right" if name not in ("", "t") else "left", no_wrap=True)
    shown = 3 if compact else 12
    for p in windows[-shown:]:
        served = p.throughput_rps if stream is not None else p.throughput_ips
        table.add_row(fmt.clock(p.t), "warmup" if p.warmup else "", fmt.rate(served), fmt.ms(p.p50),
                      fmt.ms(p.p99), fmt.ms(p.queue), fmt.ms(p.compute))
    blocks: list[RenderableType] = [head, Text(windows_title(len(windows), shown), style="bold dim")]
    blocks.append(table if windows else Text("no window yet", style="dim"))
    counts = None if latency is None or compact else _histogram(latency, width)
    if latency is None:
        distribution: RenderableType = Text("no latency yet", style="dim")
    elif counts is not None:  # the recorded distribution, then the percentiles on one line
        distribution = Group(counts, _percentile_line(latency))
    else:
        distribution = _percentile_line(latency) if compact else _distribution(latency, width)
    title = ("latency histogram (requests per bin, log scale)" if counts is not None else
             "latency percentiles" + ("" if compact else " (log scale)"))
    blocks += [Text(title, style="bold dim"), distribution]
    if stream is not None:
        blocks += [Text("time to the first response (TTFT), between responses (ITL)", style="bold dim"),
                   _stream_lines(stream)]
    blocks += [Text("server, per request", style="bold dim"), _server(row.server),
               Text("GPUs and host during the level", style="bold dim"), _traces(state, row, width)]
    return Group(*blocks)
