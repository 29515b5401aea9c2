"""An Azure LLM inference trace (CSV) as the prompts of an OpenAI sweep: each line a prompt of
ContextTokens words and GeneratedTokens as max_tokens, its timestamps kept for load.arrival =
"trace" (seconds from the first, the fraction past microseconds read too); a malformed line is one
line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import UserError
from engine.load.arrivals import trace_rate
from engine.openai.requests import read_jsonl

CSV = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.0000000,12,1
"""


def test_each_line_is_a_prompt_of_its_lengths_at_its_time(tmp_path: Path) -> None:
    path = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    path.write_text(CSV)
    made = read_jsonl(str(path), "")
    assert made.source == "azure"
    assert [p.words for p in made.prompts] == [374, 396, 12]
    assert [p.max_tokens for p in made.prompts] == [44, 109, 1]
    assert made.times == pytest.approx((0.0, 4.314579, 4.31941))
    assert trace_rate(list(made.times)) == pytest.approx(2 / 4.31941)


@pytest.mark.parametrize(("line", "words"), [
    ("2023-11-16 18:15:52.1,12", "line 3: expected TIMESTAMP,ContextTokens,GeneratedTokens, found 2 cells"),
    ("yesterday,12,4", "line 3: TIMESTAMP 'yesterday' is not a date and time"),
    ("2023-11-16 18:15:52.1,0,4", "line 3: ContextTokens is '0'"),
    ("2023-11-16 18:15:40.1,12,4", "line 3: TIMESTAMP 2023-11-16 18:15:40.1 is before the line before's"),
])
def test_a_malformed_line_is_one_line_naming_it(tmp_path: Path, line: str, words: str) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(CSV.splitlines()[0] + "\n" + CSV.splitlines()[1] + "\n" + line + "\n")
    with pytest.raises(UserError) as caught:
        read_jsonl(str(path), "")
    assert words in str(caught.value) and "\n" not in str(caught.value)
