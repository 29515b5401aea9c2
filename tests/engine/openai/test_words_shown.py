"""A level whose server reported no usage counts words: its token figures are marked as words
wherever tokens are shown (the table's tok/s and $/Mtok, the answer's details and line)."""

from __future__ import annotations

from engine import events as ev
from engine.analysis.percentiles import latency_stats
from engine.columns import SWEEP, LevelFigures, select, token_word
from tests.structs import replace

TOKENS = ev.StreamStats(ttft=latency_stats([4_000_000] * 10, histogram=True),
                        itl=latency_stats([2_000_000] * 90, histogram=True),
                        responses_per_request=8.0, output_tokens_per_s=400.0, tokens_per_request=8.0,
                        input_tokens_per_request=11.0, input_tokens_per_s=550.0)
WORDS = replace(TOKENS, tokens_are_words=True)


def _cells(stream: ev.StreamStats) -> list[str]:
    row = LevelFigures(mode="concurrency", level=1.0, status="stable", stream=stream, cost_per_million_tokens=1.39)
    return [c.cell(row) for c in select(SWEEP, ("tokens", "cost_mtok"))]


def test_words_are_marked_in_the_token_columns() -> None:
    assert _cells(TOKENS) == ["400.0", "$1.39"]
    assert _cells(WORDS) == ["400.0w", "$1.39w"]
    assert token_word(TOKENS) == "tokens" and token_word(TOKENS, short=True) == "tok"
    assert token_word(WORDS) == "words" and token_word(None) == "tokens"


def test_hosts_merged_keep_the_servers_counts_and_the_words_flag() -> None:
    from engine.analysis.summed import merged_stream

    merged = merged_stream([TOKENS, replace(TOKENS, input_tokens_per_request=13.0)])
    assert merged is not None and merged.input_tokens_per_request == 12.0 and merged.input_tokens_per_s == 1100.0
    assert not merged.tokens_are_words
    unknown = merged_stream([TOKENS, replace(WORDS, input_tokens_per_request=None, input_tokens_per_s=None)])
    assert unknown is not None and unknown.input_tokens_per_request is None and unknown.input_tokens_per_s is None
    assert unknown.tokens_are_words  # one host's words make the merged figure words
