"""A parser for the Prometheus text exposition format (what Triton serves at /metrics).

Only what a reader of gauges and counters needs: metric name, labels, value. Lines that do
not parse are counted, not fatal, so one odd line from a newer server cannot blind us.
"""

from __future__ import annotations

import math
import re
from collections.abc import Container
from dataclasses import dataclass, field

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@dataclass(frozen=True)
class MetricSample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass
class ParsedMetrics:
    samples: list[MetricSample] = field(default_factory=list)
    malformed: int = 0  # lines that were neither comments nor valid samples

    def named(self, name: str) -> list[MetricSample]:
        return [s for s in self.samples if s.name == name]

    def names(self) -> set[str]:
        return {s.name for s in self.samples}


def _parse_labels(text: str, start: int) -> tuple[dict[str, str], int]:
    """Parse ``{a="x",b="y"}`` from ``text[start] == "{"``; return labels and the index after
    the closing brace. Raises ValueError on malformed input."""
    labels: dict[str, str] = {}
    i = start + 1
    n = len(text)
    while True:
        while i < n and text[i] in " \t,":
            i += 1
        if i >= n:
            raise ValueError("unterminated labels")
        if text[i] == "}":
            return labels, i + 1
        eq = text.find("=", i)
        if eq < 0:
            raise ValueError("label without '='")
        key = text[i:eq].strip()
        if not key or eq + 1 >= n or text[eq + 1] != '"':
            raise ValueError("label value must be quoted")
        i = eq + 2
        value: list[str] = []
        while True:
            if i >= n:
                raise ValueError("unterminated label value")
            ch = text[i]
            if ch == "\\" and i + 1 < n:
                value.append(_ESCAPES.get(text[i + 1], "\\" + text[i + 1]))
                i += 2
            elif ch == '"':
                i += 1
                break
            else:
                value.append(ch)
                i += 1
        labels[key] = "".join(value)


def _parse_value(token: str) -> float:
    lowered = token.lower()
    if lowered in ("nan",):
        return math.nan
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    return float(token)


def parse_line(line: str) -> MetricSample | None:
    """One sample line -> MetricSample; None for blank and comment lines.
    Raises ValueError for a line that is neither."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    brace = line.find("{")
    space = min((p for p in (line.find(" "), line.find("\t")) if p >= 0), default=-1)
    if brace >= 0 and (space < 0 or brace < space):
        name = line[:brace]
        labels, rest_at = _parse_labels(line, brace)
        rest = line[rest_at:].split()
    else:
        if space < 0:
            raise ValueError("sample without a value")
        name = line[:space]
        labels = {}
        rest = line[space:].split()
    if not name or not rest or len(rest) > 2:  # value, then an optional timestamp
        raise ValueError("expected: name{labels} value [timestamp]")
    return MetricSample(name=name, labels=labels, value=_parse_value(rest[0]))


def parse_prometheus_text(text: str, only: Container[str] | None = None) -> ParsedMetrics:
    """All samples, or with ``only`` just the metrics of those names: a big server's page
    has thousands of per-model lines that a GPU reader can skip without parsing labels."""
    parsed = ParsedMetrics()
    for line in text.splitlines():
        if only is not None:
            name = _NAME.match(line)
            if name is None or name.group() not in only:
                continue
        try:
            sample = parse_line(line)
        except ValueError:
            parsed.malformed += 1
            continue
        if sample is not None:
            parsed.samples.append(sample)
    return parsed
