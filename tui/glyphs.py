"""Tiny text charts for the screen: sparklines and gauges. Numbers become text in
engine/format.py; these turn them into cells. Pure functions, no Textual."""

from __future__ import annotations

from collections.abc import Sequence

from engine.format import is_number

SPARK_CHARS = "▁▂▃▄▅▆▇█"


def spark(values: Sequence[float | None], width: int, lo: float | None = None, hi: float | None = None) -> str:
    """A one-line sparkline of the last ``width`` values; gaps (None) render as spaces.

    ``lo``/``hi`` fix the scale (e.g. 0..100 for utilisation) so that bars compare across rows.
    """
    if width <= 0:
        return ""
    tail = list(values)[-width:]
    numbers = [v for v in tail if is_number(v)]
    if not numbers:
        return " " * width
    low = min(numbers) if lo is None else lo
    high = max(numbers) if hi is None else hi
    span = high - low
    chars = []
    for v in tail:
        if not is_number(v):
            chars.append(" ")
            continue
        if span <= 0:
            level = len(SPARK_CHARS) // 2 if v > 0 else 0  # a flat series, not an empty one
        else:
            frac = min(1.0, max(0.0, (v - low) / span))
            level = int(round(frac * (len(SPARK_CHARS) - 1)))
        chars.append(SPARK_CHARS[level])
    return " " * (width - len(chars)) + "".join(chars)  # newest next to the value that follows


def bar(fraction: float | None, width: int, full: str = "█", empty: str = "░") -> str:
    """A horizontal gauge with eighth-cell resolution."""
    if width <= 0:
        return ""
    if not is_number(fraction):
        return " " * width
    frac = min(1.0, max(0.0, float(fraction)))
    eighths = int(round(frac * width * 8))
    whole, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part and full == "█" else ""
    text = full * whole + partial
    return text + empty * (width - len(text))
