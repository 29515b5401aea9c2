"""Numbers to text: the one place a figure gets its reading, for the screen, the headless log,
the probe CLI and every report (text, Markdown, HTML). Pure functions, no imports from the rest
of the engine, so every layer may use it.

The rules (docs/architecture.md repeats them; tests/engine/test_format.py holds them):

- Not available (None or NaN) reads ``NA`` ("-"), never 0. One ASCII cell: it aligns on every
  terminal and greps in a log.
- Latency in milliseconds, three significant figures, at most two decimals: 2.90, 36.4, 123,
  1,234. Seconds in, so no caller multiplies by 1000 twice.
- Throughput (images/s, requests/s, samples/s): one decimal below 1000, whole numbers with
  thousands separators from 1000: 987.6, 1,500, 123,457. Never a "k" suffix: the screen and the
  report read the same digits.
- Percent: whole from 10, one decimal below 10: 93%, 4.5%. ``percent`` takes a fraction (0.93),
  ``percent_points`` a value already in points (NVML's utilisation, 93.0).
- Speedup: two decimals and "x": 3.40x. An average batch size: one decimal, 7.2.
- Memory in GiB: two decimals below 10, one from 10: 0.52, 79.6. Message sizes in binary units
  (64 MiB), a request's body in decimal units (602 KB); all-reduce time in microseconds with one decimal (nccl-tests' unit); bandwidth in
  GB/s with two decimals (nccl-tests' reading).
- Money: dollars with at least three significant figures and two decimals: $0.000694, $1.50.
- Time per epoch: three significant figures and "s" below a minute (0.482s, 48.2s), then as a
  duration (3m05s, 26h40m).
- Load levels: concurrency as an integer, a rate as given and "/s": 16, 12.5/s.
- Table cells hold the number; the column's header holds the unit ("p99 ms"). Units that vary
  with the value (sizes) or that are the figure's sign (%, x, $) stay in the cell.

Where a fixed-width gauge needs fewer digits (the GPU panel's "12.3/80G"), the caller says so
with ``digits``; a table or a report never does.
"""

from __future__ import annotations

import math
from typing import TypeGuard

NA = "-"


def is_number(value: float | None) -> TypeGuard[float]:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _fixed(value: float, digits: int) -> str:
    """Thousands separators from 1000, ``digits`` decimals."""
    return f"{value:,.{digits}f}"


def ms(seconds: float | None) -> str:
    """Seconds -> milliseconds, three significant figures (at most two decimals)."""
    if not is_number(seconds):
        return NA
    value = seconds * 1000.0
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return _fixed(value, digits)


def us(seconds: float | None) -> str:
    """Seconds -> microseconds, one decimal (the all-reduce table's time)."""
    return NA if not is_number(seconds) else _fixed(seconds * 1e6, 1)


def rate(per_s: float | None) -> str:
    """A throughput: one decimal below 1000, whole numbers with separators from there."""
    if not is_number(per_s):
        return NA
    value = float(per_s)
    return _fixed(value, 1 if abs(value) < 1000 else 0)


def count(value: float | None) -> str:
    """A count of things (preemptions, tokens): a whole number with separators."""
    return NA if not is_number(value) else _fixed(round(value), 0)


def percent(fraction: float | None) -> str:
    """A fraction as percent: 0.93 -> "93%", 0.045 -> "4.5%"."""
    return NA if not is_number(fraction) else percent_points(fraction * 100)


def percent_points(value: float | None) -> str:
    """A value already in percent points (NVML utilisation, CPU percent): 93.0 -> "93%"."""
    if not is_number(value):
        return NA
    return f"{value:.1f}%" if abs(value) < 10 else f"{value:.0f}%"


def times(value: float | None) -> str:
    """A speedup: "3.40x"."""
    return NA if not is_number(value) else f"{value:.2f}x"


def ratio(value: float | None, digits: int = 2) -> str:
    return NA if not is_number(value) else f"{value:.{digits}f}"


def batch(value: float | None) -> str:
    """An average batch size (Triton's statistics): one decimal."""
    return ratio(value, 1)


def gib(n_bytes: float | None, digits: int | None = None) -> str:
    """Bytes -> GiB, the number only: two decimals below 10 GiB, one from there."""
    if not is_number(n_bytes):
        return NA
    value = n_bytes / 2**30
    if digits is None:
        digits = 2 if abs(value) < 10 else 1
    return f"{value:.{digits}f}"


def size(n_bytes: float | None) -> str:
    """Message sizes: powers of two read best in binary units."""
    if not is_number(n_bytes):
        return NA
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if value.is_integer() else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def body_size(n_bytes: float) -> str:
    """A request's size in decimal units, as a body size is usually quoted: 602112 -> "602 KB"."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n_bytes >= scale:
            value = n_bytes / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{n_bytes:.0f} B"


def gbps(value: float | None) -> str:
    """A bandwidth already in GB/s (the all-reduce's algbw and busbw)."""
    return NA if not is_number(value) else f"{value:.2f}"


def bytes_rate(bps: float | None) -> str:
    """Bytes per second with its unit: "1.234 GB/s", "12.34 MB/s" (decimal units, as links are)."""
    if not is_number(bps):
        return NA
    return f"{bps / 1e9:.3f} GB/s" if bps >= 1e8 else f"{bps / 1e6:.2f} MB/s"


def watts(value: float | None) -> str:
    return NA if not is_number(value) else f"{value:.0f}W"


MAX_PER_HOUR = 10_000.0  # dollars per hour of a box: 8 of the dearest GPUs rent for well under this
MIN_PER_HOUR = 1e-4  # a hundredth of a cent an hour; a non-zero price below this is a slip
MONEY_WIDTH = 16  # the widest money() text; beyond it, scientific notation


def price_problem(value: object, gpus: int = 1) -> str | None:
    """Why ``value`` ($/h of a box with ``gpus`` GPUs) is no price, in words ("a ..."); None if it
    is one. Zero means "not priced". 1e308 passes "a finite number" and printed a 534-character
    dollar figure, 1e-300 300 zeros: slips, refused in one line where the price is given."""
    top = MAX_PER_HOUR * max(1, gpus / 8)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return "a finite number of dollars per hour >= 0"
    if value and not MIN_PER_HOUR <= value <= top:
        return f"a price from ${MIN_PER_HOUR:g} to ${top:,.0f} per hour (or 0: not priced)"
    return None


def money(value: float | None, significant: int = 3) -> str:
    """Dollars with at least ``significant`` significant digits and two decimals: $0.000694, $1.50;
    never wider than MONEY_WIDTH (a figure made from an extreme price: $1.23e+15, $4.56e-12)."""
    if not is_number(value):
        return NA
    if value == 0:
        return "$0.00"
    digits = max(2, significant - 1 - math.floor(math.log10(abs(value))))
    text = f"${value:,.{digits}f}"
    return text if len(text) <= MONEY_WIDTH else f"${value:.{max(significant - 1, 0)}e}"


def p_value(value: float | None, significant: bool | None) -> str:
    """Welch's p against one device: "<0.001*", "0.210" ("*": the difference is significant)."""
    if not is_number(value):
        return NA
    text = "<0.001" if value < 0.001 else f"{value:.3f}"
    return text + ("*" if significant else "")


def level(mode: str, value: float) -> str:
    """A load level: concurrency is an integer, a rate may be fractional requests/s."""
    if mode == "rate":
        return f"{value:g}/s"
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"


def level_value(value: float) -> str:
    """A level without its mode (lists of planned levels, where the heading names the mode)."""
    return f"{value:g}"


def duration(seconds: float | None) -> str:
    """Compact elapsed/remaining time: 45s, 3m05s, 1h02m."""
    if not is_number(seconds) or math.isinf(seconds):
        return NA
    total = max(0, int(round(seconds)))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def epoch_time(seconds: float | None) -> str:
    """A training epoch's time: three significant figures below a minute (0.482s, 2.41s, 48.2s),
    then duration()'s reading (3m05s, 1h02m); an epoch on a toy dataset can take under a second."""
    if not is_number(seconds) or math.isinf(seconds):
        return NA
    if seconds >= 59.95:
        return duration(seconds)
    if seconds <= 0:
        return "0s"
    digits = max(0, 2 - math.floor(math.log10(seconds)))
    return f"{seconds:.{digits}f}s"


def clock(seconds: float | None) -> str:
    """Session-relative time as mm:ss (h:mm:ss past an hour); never the wall clock."""
    if not is_number(seconds):
        return "--:--"
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def plural(n: int, word: str) -> str:
    """"1 level", "4 levels": counts read as words."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
