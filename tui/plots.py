"""Multi-row text charts for the screen, drawn in braille (2x4 dots a cell): lines with a y axis
and its labels, an optional log-10 y axis, a horizontal target line, marks on the x axis (level
boundaries) and point markers (open for an unsound level). Pure functions, no Textual: a chart
is a list of Rich `Text` lines, so that the same numbers draw alike in any panel."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich.text import Text

from engine.format import is_number

BRAILLE = 0x2800
# dot bits of a braille cell by (column, row): rows 0-3 from the top
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))


@dataclass
class Line:
    name: str
    points: list[tuple[float, float]]  # (x, y); y None or not finite: a gap
    style: str = "green"
    markers: bool = False  # a marker at each point (levels on the knee)
    unsound: list[bool] = field(default_factory=list)  # per point: an open marker


@dataclass
class Chart:
    lines: list[Text]
    plot_x: int  # the column the plot area starts at (after the y labels)
    plot_w: int


def ms_label(seconds: float) -> str:
    """A latency axis label: milliseconds below a second ("0.5", "20", "100"), then seconds ("1s")."""
    return f"{seconds:g}s" if seconds >= 1 else f"{seconds * 1000:.3g}"


def _log(v: float) -> float:
    return math.log10(v)


def y_ticks(lo: float, hi: float, log_y: bool) -> tuple[float, float]:
    """The axis's ends: whole decades on a log axis, the data's own range (from 0) otherwise."""
    if log_y:
        return 10 ** math.floor(_log(lo)), 10 ** math.ceil(_log(hi) if hi > lo else _log(hi) + 1)
    top = hi if hi > 0 else 1.0
    return min(0.0, lo), top


def line_chart(lines: Sequence[Line], width: int, height: int, *, log_y: bool = False,
               y_format: Callable[[float], str] = lambda v: f"{v:g}", x_range: tuple[float, float] | None = None,
               target: tuple[float, str] | None = None, marks: Sequence[tuple[float, str]] = (),
               x_format: Callable[[float], str] | None = None) -> Chart:
    """``height`` rows of plot plus one x-axis row (and one of x labels where ``marks`` or
    ``x_format`` give them). ``target``: (y, style), a dotted line across. ``marks``: (x, label) on
    the x axis, as level boundaries."""
    values = [(x, y) for ln in lines for x, y in ln.points if is_number(x) and is_number(y) and (y > 0 or not log_y)]
    tys = [target[0]] if target and (target[0] > 0 or not log_y) else []
    label_w = 6
    plot_w = max(4, width - label_w - 1)
    out: list[Text] = []
    if not values:
        out = [Text(" " * label_w + "│", style="dim") for _ in range(height)]
        out[height // 2] = Text(" " * label_w + "│ no data yet", style="dim")
        out.append(Text(" " * label_w + "└" + "─" * plot_w, style="dim"))
        return Chart(out, label_w + 1, plot_w)
    xs = [x for x, _ in values] + [x for x, _ in marks]
    x_lo, x_hi = x_range or (min(xs), max(xs))
    if x_hi <= x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_lo, y_hi = y_ticks(min([y for _, y in values] + tys), max([y for _, y in values] + tys), log_y)
    fy = _log if log_y else float
    f_lo, f_hi = fy(y_lo), fy(y_hi)
    if f_hi <= f_lo:
        f_hi = f_lo + 1
    dots_w, dots_h = plot_w * 2, height * 4

    def dx(x: float) -> int:
        return min(dots_w - 1, max(0, round((x - x_lo) / (x_hi - x_lo) * (dots_w - 1))))

    def dy(y: float) -> int:  # 0 at the top
        return min(dots_h - 1, max(0, round((f_hi - fy(y)) / (f_hi - f_lo) * (dots_h - 1))))

    cells = [[0] * plot_w for _ in range(height)]
    styles: list[list[str | None]] = [[None] * plot_w for _ in range(height)]
    overlay: dict[tuple[int, int], tuple[str, str]] = {}

    def dot(px: int, py: int, style: str) -> None:
        row, col = py // 4, px // 2
        cells[row][col] |= _DOTS[px % 2][py % 4]
        styles[row][col] = style

    if target is not None and (target[0] > 0 or not log_y):
        ty = dy(target[0])
        for px in range(0, dots_w, 2):
            dot(px, ty, target[1])
    for ln in lines:
        pts = [(dx(x), dy(y), k) for k, (x, y) in enumerate(ln.points)
               if is_number(x) and is_number(y) and (y > 0 or not log_y)]
        for (x0, y0, _), (x1, y1, _) in zip(pts, pts[1:], strict=False):
            steps = max(abs(x1 - x0), abs(y1 - y0), 1)
            for s in range(steps + 1):
                dot(round(x0 + (x1 - x0) * s / steps), round(y0 + (y1 - y0) * s / steps), ln.style)
        if len(pts) == 1 or not ln.markers:
            for px, py, _ in pts[-1:] if not ln.markers else []:
                dot(px, py, ln.style)
        if ln.markers:
            for px, py, k in pts:
                open_ = k < len(ln.unsound) and ln.unsound[k]
                overlay[(py // 4, px // 2)] = ("○" if open_ else "●", ln.style)
    labels = {0: y_format(y_hi), height - 1: y_format(y_lo)}
    if log_y:  # each decade on the row it falls in, where the rows leave room
        for d in range(round(f_lo) + 1, round(f_hi)):
            row = dy(10.0 ** d) // 4
            if all(abs(row - taken) > 1 for taken in labels):
                labels[row] = y_format(10.0 ** d)
    elif height >= 5:
        labels[height // 2] = y_format((y_hi + y_lo) / 2)
    for row in range(height):
        text = Text(no_wrap=True, overflow="crop")
        text.append(f"{labels.get(row, ''):>{label_w}}", style="dim")
        text.append("┤" if row in labels else "│", style="dim")
        for col in range(plot_w):
            if (row, col) in overlay:
                char, style = overlay[(row, col)]
                text.append(char, style=f"bold {style}")
            elif cells[row][col]:
                text.append(chr(BRAILLE + cells[row][col]), style=styles[row][col] or "")
            else:
                text.append(" ")
        out.append(text)
    axis = ["─"] * plot_w
    under = [" "] * plot_w
    for x, label in marks:
        col = dx(x) // 2
        axis[col] = "┴"
        if all(c == " " for c in under[col:col + len(label) + 1]) and col + len(label) <= plot_w:
            under[col:col + len(label)] = list(label)
    if x_format is not None and not marks:
        for x in (x_lo, (x_lo + x_hi) / 2, x_hi):
            label = x_format(x)
            col = min(plot_w - len(label), max(0, dx(x) // 2 - len(label) // 2))
            if all(c == " " for c in under[max(0, col - 1):col + len(label) + 1]):
                under[col:col + len(label)] = list(label)
    out.append(Text(" " * label_w + "└" + "".join(axis), style="dim", no_wrap=True, overflow="crop"))
    if marks or x_format is not None:
        out.append(Text(" " * (label_w + 1) + "".join(under).rstrip(), style="dim", no_wrap=True, overflow="crop"))
    return Chart(out, label_w + 1, plot_w)


def area_rows(values: Sequence[float | None], width: int, rows: int, hi: float) -> list[str]:
    """A filled history (newest on the right) ``rows`` high, 4 dots a row, 2 samples a cell: the
    multi-row GPU graph. ``hi`` fixes the top (100 for utilization)."""
    recent: list[float | None] = list(values)[-width * 2:]
    tail: list[float | None] = [None] * (width * 2 - len(recent))
    tail += recent
    dots_h = rows * 4
    heights = [0 if v is None or not is_number(v) or hi <= 0 else min(dots_h, max(1 if v > 0 else 0, round(v / hi * dots_h)))
               for v in tail]
    out = []
    for row in range(rows):
        bottom = (rows - 1 - row) * 4  # dots below this row
        chars = []
        for col in range(width):
            bits = 0
            for side in (0, 1):
                h = heights[col * 2 + side] - bottom
                for d in range(min(4, max(0, h))):
                    bits |= _DOTS[side][3 - d]
            chars.append(chr(BRAILLE + bits) if bits else " ")
        out.append("".join(chars))
    return out
