"""Number formatting and tables shared by the text, Markdown and HTML outputs.
"Not available" is shown as an em dash, never as 0."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

NA = "—"


def ms(seconds: float | None) -> str:
    if seconds is None:
        return NA
    value = seconds * 1000.0
    return f"{value:.2f}" if value < 100 else f"{value:.1f}" if value < 1000 else f"{value:.0f}"


def rate(value: float | None) -> str:
    if value is None:
        return NA
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def pct(fraction: float | None) -> str:
    return NA if fraction is None else f"{fraction * 100:.1f} %"


def pct_points(value: float | None) -> str:
    return NA if value is None else f"{value:.0f} %"


def money(value: float | None, significant: int = 3) -> str:
    """Dollars with at least ``significant`` significant digits: $0.000694, $1.50."""
    if value is None:
        return NA
    if value == 0:
        return "$0"
    digits = max(2, significant - 1 - math.floor(math.log10(abs(value))))
    return f"${value:.{digits}f}"


def level(value: float) -> str:
    return f"{value:g}"


def gib(value: float | None) -> str:
    return NA if value is None else f"{value / 2**30:.1f} GiB"


def md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align_right_from: int = 1) -> str:
    """A GitHub Markdown table; numbers right-aligned from column ``align_right_from``."""
    marks = ["---" if i < align_right_from else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(md_escape(h) for h in header) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Fixed-width columns for a terminal: first column left-aligned, the rest right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=False)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """Columns from ``left`` on hold numbers: right-aligned (class "n")."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    numeric = ' class="n"'
    body = "".join(
        "<tr>" + "".join(f"<td{numeric if i >= left else ''}>{html.escape(str(c))}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
