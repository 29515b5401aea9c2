"""A level whose server reported no usage counts words: its token figures are marked as words
wherever tokens are shown (the table's tok/s and $/Mtok, the answer's details and line)."""

from __future__ import annotations

import dataclasses

from engine import events as ev
from engine.columns import SWEEP, LevelFigures, select, token_word

TOKENS = ev.StreamStats(ttft=ev.LatencyStats(count=10, p50=0.004, p99=0.0125),
                        itl=ev.LatencyStats(count=90, p50=0.002, p99=0.003),
                        responses_per_request=8.0, output_tokens_per_s=400.0, tokens_per_request=8.0,
                        input_tokens_per_request=11.0, input_tokens_per_s=550.0)
WORDS = dataclasses.replace(TOKENS, tokens_are_words=True)


def _cells(stream: ev.StreamStats) -> list[str]:
    row = LevelFigures(mode="concurrency", level=1.0, status="stable", stream=stream, cost_per_million_tokens=1.39)
    return [c.cell(row) for c in select(SWEEP, ("tokens", "cost_mtok"))]


def test_words_are_marked_in_the_token_columns() -> None:
    assert _cells(TOKENS) == ["400.0", "$1.39"]
    assert _cells(WORDS) == ["400.0w", "$1.39w"]
    assert token_word(TOKENS) == "tokens" and token_word(TOKENS, short=True) == "tok"
    assert token_word(WORDS) == "words" and token_word(None) == "tokens"
