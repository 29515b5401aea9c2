"""A Mooncake trace as the prompts of an OpenAI sweep: equal hash ids make equal prompt blocks (so
requests share prefixes as the trace's did), each prompt has its input_length in words and its
output_length as max_tokens, and a malformed line is one line naming it (exit 2 on the CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.openai.requests import read_jsonl
from tests.engine.openai.fake_openai import FakeOpenAiThread

ROOT = Path(__file__).resolve().parents[3]
TRACE = [
    {"timestamp": 0, "input_length": 30, "output_length": 5, "hash_ids": [1, 2, 3]},
    {"timestamp": 10, "input_length": 25, "output_length": 7, "hash_ids": [1, 2, 9]},
    {"timestamp": 10, "input_length": 12, "output_length": 3, "hash_ids": [4]},
    {"timestamp": 35, "input_length": 40, "output_length": 2, "hash_ids": [1]},
]


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_equal_hash_ids_share_their_blocks(tmp_path: Path) -> None:
    made = read_jsonl(str(_write(tmp_path / "trace.jsonl", TRACE)), "", block_words=10)
    assert made.source == "mooncake" and len(made.prompts) == 4
    words = [p.text.split() for p in made.prompts]
    assert [len(w) for w in words] == [30, 25, 12, 40]  # input_length words each
    assert [p.max_tokens for p in made.prompts] == [5, 7, 3, 2]  # output_length as max_tokens
    assert words[0][:20] == words[1][:20] and words[0][20:25] != words[1][20:25]  # blocks 1, 2 shared; 3 and 9 not
    assert words[3][:10] == words[0][:10] and words[3][10:20] != words[0][10:20]  # block 1, then its own words
    assert words[2][:10] != words[0][:10]


@pytest.mark.parametrize(("row", "words"), [
    ('{"timestamp": 0, "input_length": 5', "line 2 is not JSON"),
    ({"timestamp": 0, "input_length": 5, "output_length": 1}, "line 2: a Mooncake line needs"),
    ({"timestamp": -5, "input_length": 5, "output_length": 1, "hash_ids": [1]}, "line 2: timestamp -5"),
    ({"timestamp": 9, "input_length": 0, "output_length": 1, "hash_ids": [1]}, "line 2: input_length is 0"),
    ({"timestamp": 9, "input_length": 5, "output_length": 1, "hash_ids": ["a"]}, "line 2: hash_ids is not a list"),
])
def test_a_malformed_line_is_one_line_naming_it(tmp_path: Path, row: object, words: str) -> None:
    path = _write(tmp_path / "bad.jsonl", [TRACE[0], row])
    with pytest.raises(UserError, match="^input data .*") as caught:
        read_jsonl(str(path), "", block_words=10)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_malformed_trace_exits_2_on_the_command_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", [TRACE[0], {"timestamp": 1}])
    with FakeOpenAiThread() as url:  # the file is read once the server answers, before any load
        proc = subprocess.run([sys.executable, "-m", "tui.cli", "--url", url, "--no-check", "--no-record",
                               "--headless", "--input-data", str(path)], cwd=ROOT, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "line 2: a Mooncake line needs" in lines[0], proc.stderr
