"""Number formatting and tiny text charts shared by the TUI and the headless printer.

Pure functions, no Textual: "not available" (None) always renders as NA, never as 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeGuard

NA = "-"
SPARK_CHARS = "▁▂▃▄▅▆▇█"


def is_number(value: float | None) -> TypeGuard[float]:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def ms(seconds: float | None, digits: int | None = None) -> str:
    """Seconds -> milliseconds with precision that suits the magnitude."""
    if not is_number(seconds):
        return NA
    value = seconds * 1000.0
    if digits is None:
        digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:.{digits}f}"


def rate(per_s: float | None) -> str:
    if not is_number(per_s):
        return NA
    value = float(per_s)
    if abs(value) >= 10_000:
        return f"{value / 1000:.1f}k"
    return f"{value:.1f}" if abs(value) < 1000 else f"{value:.0f}"


def level_label(mode: str, level: float) -> str:
    """Concurrency levels are integers; rates may be fractional requests/s."""
    if mode == "rate":
        text = f"{level:g}"
        return f"{text}/s"
    return f"{int(level)}" if float(level).is_integer() else f"{level:g}"


def percent(value: float | None, digits: int = 0) -> str:
    if not is_number(value):
        return NA
    return f"{value:.{digits}f}%"


def ratio(value: float | None, digits: int = 2) -> str:
    if not is_number(value):
        return NA
    return f"{value:.{digits}f}"


def gib(n_bytes: float | None, digits: int = 1) -> str:
    if not is_number(n_bytes):
        return NA
    return f"{n_bytes / 2**30:.{digits}f}"


def size(n_bytes: float | None) -> str:
    """Message sizes in the all-reduce table: powers of two read best in binary units."""
    if not is_number(n_bytes):
        return NA
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if value.is_integer() else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def watts(value: float | None) -> str:
    return NA if not is_number(value) else f"{value:.0f}W"


def dollars(value: float | None) -> str:
    if not is_number(value):
        return NA
    if value >= 1:
        return f"${value:.2f}"
    return f"${value:.4f}"


def duration(seconds: float | None) -> str:
    """Compact elapsed/remaining time: 45s, 3m05s, 1h02m."""
    if not is_number(seconds):
        return NA
    total = max(0, int(round(seconds)))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def clock(seconds: float | None) -> str:
    """Session-relative time as mm:ss (h:mm:ss past an hour); never the wall clock."""
    if not is_number(seconds):
        return "--:--"
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


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


def plural(n: int, word: str) -> str:
    """"1 level", "4 levels": counts on screen read as words."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
