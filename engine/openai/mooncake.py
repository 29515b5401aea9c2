"""A Mooncake trace (JSONL, one request a line: ``timestamp`` in ms, ``input_length``,
``output_length``, ``hash_ids``) made into prompts, as load.input_data: each hash id is a block of
load.block_tokens words (Mooncake's traces hash 512-token blocks), the same words wherever the id
recurs, so requests with equal leading ids share their prompt's prefix as the trace's did; a
prompt is its blocks' words cut (or, past its blocks, filled with words of its own) to
input_length words; output_length is its max_tokens.

The timestamps are read and checked (non-decreasing) and kept: rate mode's load.arrival = "trace"
replays their gaps at each level's rate (engine/load/arrivals.py). A malformed line is one line
naming it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from engine.errors import UserError
from engine.prompts import SEED, prompt_text

MAX_WORDS = 48 << 20  # every prompt's words together
KEYS = ("timestamp", "input_length", "output_length", "hash_ids")


@dataclass(frozen=True)
class TraceRequest:
    text: str
    max_tokens: int
    timestamp_ms: float


def is_mooncake(line: str) -> bool:
    """Whether a JSONL file's first line is a Mooncake trace's (an object with hash_ids)."""
    try:
        value = json.loads(line)
    except ValueError:
        return False
    return isinstance(value, dict) and "hash_ids" in value and "input_length" in value


def _count(value: object, key: str, where: str, least: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= 1 << 20:
        raise UserError(f"{where}: {key} is {str(value)[:20]}, not a count from {least} to {1 << 20}")
    return value


def read_mooncake(lines: list[str], path: str, block_words: int) -> list[TraceRequest]:
    blocks: dict[int, list[str]] = {}
    out: list[TraceRequest] = []
    words_total, last_ts = 0, float("-inf")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"input data {path}: line {number}"
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise UserError(f"{where} is not JSON ({getattr(exc, 'msg', exc)})") from None
        if not isinstance(value, dict) or (missing := [k for k in KEYS if k not in value]):
            raise UserError(f"{where}: a Mooncake line needs {', '.join(KEYS)}"
                            + (f"; {', '.join(missing)} missing" if isinstance(value, dict) else ""))
        ts = value["timestamp"]
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or ts < last_ts:
            raise UserError(f"{where}: timestamp {str(ts)[:20]} is not a number at or after the line before's")
        last_ts = float(ts)
        length = _count(value["input_length"], "input_length", where, 1)
        outs = _count(value["output_length"], "output_length", where, 1)
        ids = value["hash_ids"]
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise UserError(f"{where}: hash_ids is not a list of integers")
        words_total += length
        if words_total > MAX_WORDS:
            raise UserError(f"{where}: the trace's prompts pass {MAX_WORDS:,} words, more than a sweep holds")
        words: list[str] = []
        for i in ids:
            if len(words) >= length:
                break
            if i not in blocks:
                blocks[i] = prompt_text(random.Random(f"{SEED}-block-{i}"), block_words).split()
            words += blocks[i]
        if len(words) < length:  # past its blocks: words of its own
            words += prompt_text(random.Random(f"{SEED}-line-{number}"), length - len(words)).split()
        out.append(TraceRequest(" ".join(words[:length]), outs, float(ts)))
    if not out:
        raise UserError(f"input data {path}: no requests")
    return out
