"""An Azure LLM inference trace (CSV: ``TIMESTAMP,ContextTokens,GeneratedTokens``, as Microsoft's
AzurePublicDataset publishes it) made into prompts, as load.input_data: each request a prompt of
ContextTokens words of its own (the trace says nothing of shared prefixes: none are made) and
GeneratedTokens as its max_tokens; its timestamps (``2023-11-16 18:15:46.6805900``) kept for
rate mode's load.arrival = "trace". A malformed line is one line naming it.
"""

from __future__ import annotations

import random
from datetime import datetime

from engine.errors import UserError
from engine.openai.mooncake import MAX_WORDS, TraceRequest
from engine.prompts import SEED, prompt_text

HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def is_azure(first_line: str) -> bool:
    return [c.strip() for c in first_line.split(",")][:3] == list(HEADER)


def _seconds(text: str) -> float:
    """A timestamp as seconds; its fraction past microseconds cut (datetime keeps 6 digits)."""
    whole, _, fraction = text.strip().partition(".")
    stamp = datetime.fromisoformat(whole)
    return stamp.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)


def read_azure(lines: list[str], path: str) -> list[TraceRequest]:
    out: list[TraceRequest] = []
    words_total, first = 0, None
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        where = f"input data {path}: line {number}"
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 3:
            raise UserError(f"{where}: expected {','.join(HEADER)}, found {len(cells)} cells")
        try:
            at = _seconds(cells[0])
        except ValueError:
            raise UserError(f"{where}: TIMESTAMP {cells[0][:40]!r} is not a date and time") from None
        counts = []
        for name, cell in zip(HEADER[1:], cells[1:], strict=True):
            if not cell.isdigit() or not 1 <= int(cell) <= 1 << 20:
                raise UserError(f"{where}: {name} is {cell[:20]!r}, not a count from 1 to {1 << 20}")
            counts.append(int(cell))
        first = at if first is None else first
        if out and at < first + out[-1].timestamp_ms / 1000:
            raise UserError(f"{where}: TIMESTAMP {cells[0]} is before the line before's")
        words_total += counts[0]
        if words_total > MAX_WORDS:
            raise UserError(f"{where}: the trace's prompts pass {MAX_WORDS:,} words, more than a sweep holds")
        text = prompt_text(random.Random(f"{SEED}-azure-{number}"), counts[0])
        out.append(TraceRequest(text, counts[1], (at - first) * 1000))
    if not out:
        raise UserError(f"input data {path}: no requests")
    return out
