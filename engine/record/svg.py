"""Inline SVG charts for the HTML reports: no script, no fonts or styles from the network, so a
report opens offline and looks the same anywhere. Small on purpose: lines (optionally with error
bars, a log-2 x axis for concurrency, a log-10 y axis for latency, open markers for unsound
points, and labelled reference lines: a target, level boundaries) and grouped or stacked bars."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22"]
WIDTH, HEIGHT = 680, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 28, 44  # margins; the legend sits on the right


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]  # (x, y)
    errors: list[tuple[float, float]] = field(default_factory=list)  # (low, high) per point, optional
    dashed: bool = False
    hollow: list[bool] = field(default_factory=list)  # per point: an open marker (unsound), optional
    markers_only: bool = False  # points without a line between them (e.g. warmup windows)
    color: str | None = None  # None: the palette's, by position


@dataclass
class Rule:
    """A labelled reference line across the plot: horizontal at y (a latency target) or vertical
    at x (a level boundary)."""

    at: float
    label: str = ""
    vertical: bool = False
    color: str = "#888"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 2.5, 5 x 10^k steps)."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 12))
    return ticks


def _num(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 10000:
        return f"{v / 1000:.0f}k"
    if a >= 1000:
        return f"{v / 1000:.1f}k".replace(".0k", "k")
    return f"{v:.3g}"


def _frame(title: str, body: list[str], legend: list[tuple[str, str, bool]]) -> str:
    items = []
    for i, (name, color, dashed) in enumerate(legend):
        y = TOP + 14 + i * 18
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        items.append(f'<line x1="{WIDTH - RIGHT + 12}" y1="{y - 4}" x2="{WIDTH - RIGHT + 30}" y2="{y - 4}" '
                     f'stroke="{color}" stroke-width="3"{dash}/>'
                     f'<text x="{WIDTH - RIGHT + 36}" y="{y}" font-size="11">{escape(name[:22])}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
            f'height="{HEIGHT}" role="img" font-family="sans-serif"><title>{escape(title)}</title>'
            f'<text x="{LEFT}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>'
            + "".join(body) + "".join(items) + "</svg>")


def _empty(title: str, why: str) -> str:
    return _frame(title, [f'<text x="{LEFT}" y="{HEIGHT / 2}" font-size="12" fill="#666">{escape(why)}</text>'], [])


def _axes(x_ticks: list[tuple[float, str]], y_ticks: list[tuple[float, str]], x_label: str, y_label: str) -> list[str]:
    """Ticks are given in pixel positions already."""
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP
    out = [f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/>',
           f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/>']
    for px, text in x_ticks:
        out.append(f'<line x1="{px:.1f}" y1="{y0}" x2="{px:.1f}" y2="{y0 + 4}" stroke="#333"/>'
                   f'<text x="{px:.1f}" y="{y0 + 16}" font-size="10" text-anchor="middle">{escape(text)}</text>')
    for py, text in y_ticks:
        out.append(f'<line x1="{x0}" y1="{py:.1f}" x2="{x1}" y2="{py:.1f}" stroke="#e5e5e5"/>'
                   f'<text x="{x0 - 6}" y="{py + 3:.1f}" font-size="10" text-anchor="end">{escape(text)}</text>')
    out.append(f'<text x="{(x0 + x1) / 2}" y="{HEIGHT - 8}" font-size="11" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text x="14" y="{(y0 + y1) / 2}" font-size="11" text-anchor="middle" '
               f'transform="rotate(-90 14 {(y0 + y1) / 2})">{escape(y_label)}</text>')
    return out


def _log2_ticks(xs: Sequence[float], most: int) -> list[float]:
    """Ticks on a log2 axis crowded with levels (an SLO search adds some between the planned
    ones): the powers of two among them and both ends, never every other level, which would
    drop planned ones (4, 32, 128)."""
    powers = [x for x in xs if x >= 1 and float(x).is_integer() and int(x) & (int(x) - 1) == 0]
    if len(powers) > most - 1:  # thinned from the top, so that the highest stays
        step = math.ceil(len(powers) / (most - 1))
        powers = powers[::-1][::step][::-1]
    return sorted({xs[0], *powers, xs[-1]})


def log10_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 steps per decade covering [lo, hi] (lo > 0); whole decades only when that is many."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if last == first:
        last += 1
    steps = (1, 2, 5) if last - first <= 3 else (1,)
    ticks = [m * 10.0 ** d for d in range(first, last + 1) for m in steps]
    inside = [t for t in ticks if lo <= t <= hi]
    below = [t for t in ticks if t < lo]
    above = [t for t in ticks if t > hi]
    low = [below[-1]] if below and not (inside and inside[0] == lo) else []
    high = [above[0]] if above and not (inside and inside[-1] == hi) else []
    return low + inside + high


def line_chart(title: str, series: Sequence[Series], x_label: str, y_label: str, *, log2_x: bool = False,
               log_y: bool = False, rules: Sequence[Rule] = (), continuous_x: bool = False,
               y_format: Callable[[float], str] = _num, x_format: Callable[[float], str] = _num,
               max_x_ticks: int = 10) -> str:
    """``log_y``: a log-10 y axis (values <= 0 are left out), so that a 50 ms target and a 1.2 s
    tail both read. ``rules``: reference lines (a horizontal one counts in the y range).
    ``continuous_x``: round ticks on a linear x axis (time, throughput), never the points' own x."""
    pts = [p for s in series for p in s.points if p[1] is not None and math.isfinite(p[1])]
    if log2_x:
        pts = [p for p in pts if p[0] > 0]
    if log_y:
        pts = [p for p in pts if p[1] > 0]
    if not pts:
        return _empty(title, "no data")
    fx = (lambda v: math.log2(v)) if log2_x else (lambda v: v)
    xs = sorted({p[0] for p in pts})
    span = sorted({*xs, *(r.at for r in rules if r.vertical and (r.at > 0 or not log2_x))})
    xlo, xhi = fx(span[0]), fx(span[-1])
    if xhi == xlo:
        xlo, xhi = xlo - 1, xhi + 1
    levels = [r.at for r in rules if not r.vertical and (r.at > 0 or not log_y)]
    tops = [hi for s in series for _lo, hi in s.errors] + [p[1] for p in pts] + levels
    if log_y:
        y_ticks = log10_ticks(min(min(p[1] for p in pts), *levels) if levels else min(p[1] for p in pts), max(tops))
        fy = math.log10
    else:
        y_ticks = nice_ticks(min(0.0, min(p[1] for p in pts)), max(tops))
        fy = float
    ylo, yhi = fy(y_ticks[0]), fy(y_ticks[-1])
    if yhi <= ylo:  # ticks rounded to 12 decimals collapse for values below 1e-12
        yhi = ylo + 1.0
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP

    def px(x: float) -> float:
        return x0 + 8 + (fx(x) - xlo) / (xhi - xlo) * (x1 - x0 - 16)

    def py(y: float) -> float:
        return y0 - (fy(y) - ylo) / (yhi - ylo) * (y0 - y1)

    if log2_x and len(xs) > max_x_ticks:
        tick_values = _log2_ticks(xs, max_x_ticks)
    elif (log2_x or len(xs) <= max_x_ticks) and not continuous_x:
        tick_values = xs if len(xs) <= max_x_ticks else xs[:: math.ceil(len(xs) / max_x_ticks)]
    else:
        tick_values = [t for t in nice_ticks(span[0], span[-1], max_x_ticks // 2) if span[0] <= t <= span[-1]]
    body = _axes([(px(x), x_format(x)) for x in tick_values], [(py(y), y_format(y)) for y in y_ticks], x_label, y_label)
    body += _rules(rules, px, py, span, log2_x, log_y)
    legend = []
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        keep = [(k, x, y) for k, (x, y) in enumerate(s.points)
                if y is not None and math.isfinite(y) and (x > 0 or not log2_x) and (y > 0 or not log_y)]
        if not keep:
            continue
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for _k, x, y in keep)
        if not s.markers_only:
            body.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{path}"/>')
        if len(keep) <= 40 or s.markers_only:
            for k, x, y in keep:
                hollow = k < len(s.hollow) and s.hollow[k]
                fill = 'fill="white" stroke-width="1.5" stroke="' + color + '"' if hollow else f'fill="{color}"'
                body.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="{3.5 if hollow else 2.5}" {fill}/>')
        for (x, _y), (lo, hi) in zip(s.points, s.errors, strict=False):
            body.append(f'<line x1="{px(x):.1f}" y1="{py(lo):.1f}" x2="{px(x):.1f}" y2="{py(hi):.1f}" '
                        f'stroke="{color}" stroke-width="1.5"/>')
        legend.append((s.name, color, s.dashed))
    legend += [(r.label, r.color, True) for r in rules if not r.vertical and r.label]
    return _frame(title, body, legend)


def _rules(rules: Sequence[Rule], px: Callable[[float], float], py: Callable[[float], float], xs: list[float],
           log2_x: bool, log_y: bool) -> list[str]:
    """Reference lines: horizontal ones dashed across the plot (named in the legend), vertical ones
    dotted with their label at the top, a label left out where it would crowd the previous one."""
    out: list[str] = []
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP
    last_label = -1e9
    for r in rules:
        if r.vertical:
            if not xs[0] <= r.at <= xs[-1] or (log2_x and r.at <= 0):
                continue
            x = px(r.at)
            out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y1}" stroke="{r.color}" stroke-dasharray="2 3"/>')
            if r.label and x - last_label >= 6 * len(r.label) + 4:
                out.append(f'<text x="{x + 2:.1f}" y="{y1 + 9}" font-size="9" fill="#555">{escape(r.label)}</text>')
                last_label = x
        elif r.at > 0 or not log_y:
            y = py(r.at)
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="{r.color}" stroke-width="1.5" '
                       'stroke-dasharray="6 3"/>')
    return out


def bar_chart(title: str, categories: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]],
              y_label: str, *, stacked: bool = False, y_format: Callable[[float], str] = _num) -> str:
    """Grouped (or stacked) bars: one group per category, one bar (or segment) per series."""
    values = [v for _n, vs in series for v in vs if v is not None and math.isfinite(v)]
    if not categories or not values:
        return _empty(title, "no data")
    if stacked:
        totals = [sum(v for v in (vs[i] for _n, vs in series) if v) for i in range(len(categories))]
        top = max(totals)
    else:
        top = max(values)
    y_ticks = nice_ticks(0.0, top if top > 0 else 1.0)
    yhi = y_ticks[-1] if y_ticks[-1] > 0 else 1.0  # ticks rounded to 12 decimals: 0 for tiny values
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP
    group_w = (x1 - x0) / len(categories)
    bars = 1 if stacked else max(len(series), 1)
    bar_w = group_w * 0.8 / bars

    def py(y: float) -> float:
        return y0 - y / yhi * (y0 - y1)

    body = _axes([(x0 + (i + 0.5) * group_w, c) for i, c in enumerate(categories)],
                 [(py(y), y_format(y)) for y in y_ticks], "", y_label)
    legend = []
    for j, (name, vs) in enumerate(series):
        color = PALETTE[j % len(PALETTE)]
        legend.append((name, color, False))
        for i, v in enumerate(vs):
            if v is None or not math.isfinite(v) or v <= 0:
                continue
            if stacked:
                below = sum(w for w in (series[k][1][i] for k in range(j)) if w)
                x, top_y, bottom_y = x0 + i * group_w + group_w * 0.1, py(below + v), py(below)
            else:
                x, top_y, bottom_y = x0 + i * group_w + group_w * 0.1 + j * bar_w, py(v), py(0)
            body.append(f'<rect x="{x:.1f}" y="{top_y:.1f}" width="{bar_w:.1f}" height="{max(bottom_y - top_y, 0):.1f}" '
                        f'fill="{color}"><title>{escape(name)}: {escape(y_format(v))}</title></rect>')
    return _frame(title, body, legend)
