"""A report as a list of blocks, rendered three ways: Markdown, self-contained HTML, plain text.
Reports and comparisons build blocks once; the renderers own all escaping."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import columns
from engine.record.safe_text import md_text


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str


@dataclass
class Note:
    """A callout the reader must not miss (random weights, apples-to-apples warnings)."""

    text: str
    warning: bool = False


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    caption: str = ""
    left: int = 1  # leading text columns (left-aligned); the rest hold numbers

    @classmethod
    def of(cls, cols: Sequence[columns.Column[Any]], items: Sequence[Any], caption: str = "") -> Table:
        """One of the shared tables (engine/columns.py), read as the screen reads it."""
        return cls(columns.headers(cols), [columns.row(cols, i) for i in items], caption,
                   left=max(1, columns.leading_left(cols)))


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Chart:
    svg: str  # a complete <svg> element
    caption: str = ""


Block = Heading | Para | Note | Table | Bullets | Chart


@dataclass
class Doc:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)


# --------------------------------------------------------------------------- table renderers


def md_escape(text: str) -> str:
    return md_text(text)


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align_right_from: int = 1) -> str:
    """A GitHub Markdown table; numbers right-aligned from column ``align_right_from``."""
    marks = ["---" if i < align_right_from else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(md_escape(h) for h in header) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


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


def to_markdown(doc: Doc) -> str:
    out = [f"# {md_text(doc.title)}", ""]
    for b in doc.blocks:  # text may come from outside (a server's error, a model name): never raw
        if isinstance(b, Heading):
            out += [f"{'#' * max(b.level, 2)} {md_text(b.text)}", ""]
        elif isinstance(b, Para):
            out += [md_text(b.text), ""]
        elif isinstance(b, Note):
            out += [f"> {'**Warning:** ' if b.warning else ''}{md_text(b.text)}", ""]
        elif isinstance(b, Table):
            if b.caption:
                out += [f"*{md_text(b.caption)}*", ""]
            out += [md_table(b.header, b.rows, align_right_from=b.left), ""]
        elif isinstance(b, Bullets):
            out += [f"- {md_escape(item)}" for item in b.items] + [""]
        elif isinstance(b, Chart):  # the picture lives in the HTML report; its place is named here
            out += [f"*Chart in the HTML report: {md_text(chart_title(b))}.*", ""]
    return "\n".join(out).rstrip() + "\n"


def chart_title(chart: Chart) -> str:
    """The chart's own title (its SVG <title>), as plain text."""
    found = re.search(r"<title>([^<]*)</title>", chart.svg)
    return html.unescape(found.group(1)) if found else chart.caption


def to_text(doc: Doc) -> str:
    out = [doc.title, "=" * len(doc.title), ""]
    for b in doc.blocks:
        if isinstance(b, Heading):
            out += [b.text, "-" * len(b.text)]
        elif isinstance(b, Para):
            out += [b.text, ""]
        elif isinstance(b, Note):
            out += [f"{'WARNING: ' if b.warning else 'Note: '}{b.text}", ""]
        elif isinstance(b, Table):
            if b.caption:
                out.append(b.caption)
            out += [columns.text_table(b.header, b.rows, rule=True), ""]
        elif isinstance(b, Bullets):
            out += [f"  * {item}" for item in b.items] + [""]
    return "\n".join(out).rstrip() + "\n"


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}
.note{background:#eef5ff;border-left:4px solid #1f77b4;padding:.5em .8em}
.warn{background:#fff4e5;border-left:4px solid #ff7f0e;padding:.5em .8em}
figure{margin:1em 0}figcaption{font-size:.85em;color:#555}caption{caption-side:top;text-align:left;font-style:italic}
"""


def to_html(doc: Doc) -> str:
    """One file, nothing fetched: styles inline, charts as inline SVG, no scripts."""
    e = html.escape
    out = ['<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{e(doc.title)}</title><style>{_CSS}</style></head><body>", f"<h1>{e(doc.title)}</h1>"]
    for b in doc.blocks:
        if isinstance(b, Heading):
            lv = min(max(b.level, 2), 6)
            out.append(f"<h{lv}>{e(b.text)}</h{lv}>")
        elif isinstance(b, Para):
            out.append(f"<p>{e(b.text)}</p>")
        elif isinstance(b, Note):
            out.append(f'<p class="{"warn" if b.warning else "note"}">{e(b.text)}</p>')
        elif isinstance(b, Table):
            table = html_table(b.header, b.rows, left=b.left)
            if b.caption:
                table = table.replace("<table>", f"<table><caption>{e(b.caption)}</caption>", 1)
            out.append(table)
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{e(item)}</li>" for item in b.items) + "</ul>")
        elif isinstance(b, Chart):
            cap = f"<figcaption>{e(b.caption)}</figcaption>" if b.caption else ""
            out.append(f"<figure>{b.svg}{cap}</figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
