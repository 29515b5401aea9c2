"""The study view's pictures, as pure functions of StudyState (testable without Textual): the
throughput-vs-concurrency curves of every config on one log-2 axis, and the per-config table."""

from __future__ import annotations

import math
from itertools import pairwise

from rich.table import Table
from rich.text import Text

from engine import format as fmt
from engine.analysis.answer import decide, output_rate
from engine.analysis.slo import Slo, SloPoint, parse_slo
from tui import plots
from tui.study_headless import running_config, time_left_text
from tui.study_state import ConfigTrack, StudyState

STYLES = ["bold cyan", "bold magenta", "bold green", "bold yellow", "bold red", "bold blue"]
MARKS = "●■▲◆✚✱"


def _level_text(level: float) -> str:
    return f"{level:g}"


def headline(study: StudyState) -> Text:
    s = study.started
    if s is None:
        return Text("waiting for the study to start", style="dim")
    n, total = study.position()
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"study of {s.model}", style="bold")
    text.append(f"  config {n}/{total}{running_config(study.current)}  {study.levels_done()} levels done  ")
    if study.finished is not None:
        missing = f", missing {', '.join(study.finished.missing)}" if study.finished.missing else ""
        text.append(f"study {study.finished.status}{missing}", style="bold green" if study.finished.status == "ok"
                    else "bold red")
    else:
        text.append(time_left_text(study.time_left()), style="bold")
    if s.slo:
        text.append(f"  target {s.slo}", style="dim")
    return text


def answer_text(study: StudyState) -> Text | None:
    """The study's answer line (the engine's, carried by StudyFinished), once it has ended; it
    wraps, unlike the headline: it names the config, or what limited every config instead."""
    finished = study.finished
    return Text(finished.answer, style="bold") if finished is not None and finished.answer else None


def render_curves(study: StudyState, width: int, height: int) -> Text:
    """One marker per config and level, joined column by column (throughput on y, log2 level on x)."""
    tracks = [t for t in study.configs.values() if t.points]
    label_w = 8
    plot_w, plot_h = max(10, width - label_w - 1), max(4, height - 2)
    if not tracks:
        return Text("no level measured yet", style="dim")
    levels = sorted({p[0] for t in tracks for p in t.points if p[0] > 0})
    top = max((p[1] for t in tracks for p in t.points), default=0.0) or 1.0
    lo, hi = math.log2(levels[0]), math.log2(levels[-1])
    span = (hi - lo) or 1.0

    def col(level: float) -> int:
        return round((math.log2(level) - lo) / span * (plot_w - 1))

    def row(tp: float) -> int:
        return plot_h - 1 - round(tp / top * (plot_h - 1))

    grid: list[list[tuple[str, str]]] = [[(" ", "")] * plot_w for _ in range(plot_h)]
    for i, track in enumerate(tracks):
        style = STYLES[i % len(STYLES)]
        pts = [(col(lv), row(tp)) for lv, tp, _lat, _s in track.points if lv > 0]
        for (c0, r0), (c1, r1) in pairwise(pts):
            for c in range(c0 + 1, c1):
                r = round(r0 + (r1 - r0) * (c - c0) / (c1 - c0))
                if grid[r][c][0] == " ":
                    grid[r][c] = ("·", style)
        for c, r in pts:
            grid[r][c] = (MARKS[i % len(MARKS)], style)
    out = Text(no_wrap=True, overflow="ellipsis")
    for r, line in enumerate(grid):
        label = fmt.rate(top) if r == 0 else ("0" if r == plot_h - 1 else "")
        out.append(f"{label:>{label_w}}│", style="dim")
        for char, style in line:
            out.append(char, style=style)
        out.append("\n")
    axis = [" "] * plot_w
    for lv in levels:
        tag = _level_text(lv)
        c = min(col(lv), plot_w - len(tag))
        if all(ch == " " for ch in axis[max(0, c - 1):c + len(tag)]):
            axis[c:c + len(tag)] = list(tag)
    out.append(" " * label_w + "└" + "".join(axis) + "\n", style="dim")
    for i, track in enumerate(tracks):
        out.append(f"  {MARKS[i % len(MARKS)]} {track.variant}", style=STYLES[i % len(STYLES)])
    out.append(f"   {study.items}/s vs concurrency (log2)", style="dim")
    return out


def render_knee(study: StudyState, width: int, height: int) -> Text:
    """Each config's latency (the target's percentile, p99 without one) against its throughput,
    one point per level in level order (○: unstable), on a log axis; the target dotted in red."""
    lines = []
    for i, track in enumerate(t for t in study.configs.values() if t.points):
        kept = [(lv, tp, lat) for lv, tp, lat, _s in track.points if lat is not None and tp > 0]
        lines.append(plots.Line(track.variant, [(tp, lat) for _level, tp, lat in kept], STYLES[i % len(STYLES)],
                                markers=True, unsound=[lv in track.unstable for lv, _tp, _lat in kept]))
    slo = parse_slo(study.started.slo) if study.started and study.started.slo else None
    key = Text(no_wrap=True, overflow="ellipsis")
    key.append(f"{study.percentile} ms (log) vs {study.items}/s  ", style="dim")
    for line in lines:
        key.append(f"● {line.name}  ", style=line.style)
    key.append("○ unstable", style="dim")
    if slo is not None:
        key.append(f"  ⠒ target {slo.target_s * 1000:g} ms", style="red")
    wrapped = 1 if len(key.plain) > width else 0  # the key wraps to a second line: the chart gives it room
    chart = plots.line_chart(lines, width, max(3, height - 3 - wrapped), log_y=True,
                             y_format=plots.ms_label, x_format=fmt.rate,
                             target=(slo.target_s, "red") if slo else None)
    return Text("\n").join([*chart.lines, key])


def config_table(study: StudyState, width: int | None = None) -> Table:
    """One row per config. A figure or its header's words are never cut (a cut number reads as
    another number): where one-line headers do not fit ``width``, they take two lines, and the
    recording's name, the one text cell, gives way."""
    s = study.started
    slo = parse_slo(s.slo) if s and s.slo else None
    rate = f"{study.items}/s"
    headers = [("config",), ("status",), ("levels",), ("peak", rate), ("at", "level"),
               ("SLO point", f"({s.slo})") if slo and s else ("SLO", "point"), (rate, "at SLO"), ("recording",)]
    rows = [_config_cells(study, track, slo) for track in study.configs.values()]
    cell_w = [max([0, *(len(row[i]) for row in rows)]) for i in range(len(headers))]
    one_line = sum(max(len(" ".join(h)), w) + 2 for h, w in zip(headers[:-1], cell_w, strict=False)) + len("recording")
    stacked = width is not None and one_line > width
    table = Table(expand=True, box=None, header_style="bold")
    for i, words in enumerate(headers):
        name = "\n".join(words) if stacked else " ".join(words)
        if words == ("recording",):
            table.add_column(name, justify="left", ratio=1, no_wrap=True, overflow="ellipsis")
        else:
            whole = max(cell_w[i], *(len(line) for line in name.split("\n")))
            table.add_column(name, justify="left" if i < 2 else "right", min_width=whole, no_wrap=True)
    for track, cells in zip(study.configs.values(), rows, strict=True):
        style = {"running": "bold", "failed": "red", "interrupted": "magenta", "waiting": "dim"}.get(track.status, "")
        table.add_row(*cells, style=style)
    return table


def _config_cells(study: StudyState, track: ConfigTrack, slo: Slo | None) -> list[str]:
    peak = track.peak()
    point = None
    if slo is not None and track.points:
        at = decide(track.results, slo)
        point = SloPoint(float(at.slo_level.level) if at.slo_level else None,
                         output_rate(at.slo_level) if at.slo_level else None, None, at.slo_bounded)
    return [
        track.variant, track.status, str(track.levels_done), fmt.rate(peak[1]) if peak else fmt.NA,
        _level_text(peak[0]) if peak else fmt.NA,
        (_level_text(point.level) if point and point.level is not None else ("none" if point else fmt.NA)),
        fmt.rate(point.throughput) if point and point.throughput else fmt.NA,
        track.recording or "",
    ]


def forecasts(study: StudyState) -> Text:
    """The larger configs predicted from the smaller ones, each beside its measured figure where
    the study ran it, once the study has finished (none before)."""
    lines = study.finished.forecast_lines if study.finished is not None else []
    return Text("\n".join(lines))


def scale_answers(study: StudyState) -> Text:
    """Scale out or scale up: the study's answer lines, once it has finished (none before)."""
    lines = study.finished.scale_answers if study.finished is not None else []
    text = Text()
    for i, line in enumerate(lines):
        verdict = line.rsplit("→", 1)
        text.append(("\n" if i else "") + verdict[0])
        if len(verdict) == 2:
            text.append("→" + verdict[1], style="bold")
    return text
