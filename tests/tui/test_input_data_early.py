"""The data file is read before the server starts (tui/commands/flags.py's check_input_data): what
can be wrong without the model is one line then, in the words the full read uses; what needs
the model passes, to be checked once the server answers. Pure: no server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.profiles import Load
from engine.triton import input_data
from tui.commands.flags import check_input_data

TRITON_REFUSED = [
    ("broken.json", '{"data": [{"PROMPT": ["fine"]}', "not JSON"),
    ("list.json", "[1, 2]", "expected a JSON object with a 'data' list"),
    ("empty_data.json", '{"data": []}', "'data' is empty: no entry to send"),
    ("misaligned.json", '{"data": [{"A": [1]}], "validation_data": []}', "must align with 'data' (1 entries), found 0"),
    ("prompts.jsonl", '"fine"\n{"text": 12}\n', "line 2 has no prompt"),
    ("notjson.jsonl", '"fine"\nnope\n', "line 2 is not JSON"),
    ("empty.jsonl", "\n\n", "no prompt in it"),
]


@pytest.mark.parametrize(("name", "text", "said"), TRITON_REFUSED)
def test_what_is_wrong_without_the_model_is_one_line_before_the_server(tmp_path: Path, name: str, text: str,
                                                                       said: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UserError) as err:
        check_input_data(Load(input_data=str(path)))
    assert str(err.value).startswith(f"input data {path}: ") and said in str(err.value)
    assert "\n" not in str(err.value)


def test_what_needs_the_model_passes_until_the_server_answers(tmp_path: Path) -> None:
    wrong_type = tmp_path / "strings.json"  # strings for what may be an INT32 input: the model says
    wrong_type.write_text(json.dumps({"data": [{"INPUT": ["x"]}]}))
    streams = tmp_path / "streams.json"
    streams.write_text(json.dumps({"data": [[{"INPUT": [1]}, {"INPUT": [2]}]]}))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('"a"\n{"text": "b", "MAX_TOKENS": [4]}\n')
    folder = tmp_path / "inputs"
    folder.mkdir()
    for path in (wrong_type, streams, prompts, folder):
        check_input_data(Load(input_data=str(path)))
    check_input_data(Load())  # no file, nothing to read


def test_a_file_past_the_early_limit_is_left_to_the_full_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.json"
    path.write_text("not json at all")
    with pytest.raises(UserError, match="not JSON"):
        check_input_data(Load(input_data=str(path)))
    monkeypatch.setattr(input_data, "EARLY_PARSE_BYTES", 4)  # read twice only where that is cheap
    check_input_data(Load(input_data=str(path)))
    with pytest.raises(UserError, match="no such file or folder"):  # still the readable check
        check_input_data(Load(input_data=str(tmp_path / "nope.json")))


def test_an_openai_file_is_read_by_its_own_rules(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"  # a Mooncake trace: no prompt text, which Triton's rule would refuse
    trace.write_text(json.dumps({"timestamp": 0, "input_length": 30, "output_length": 5, "hash_ids": [1]}) + "\n")
    check_input_data(Load(api="openai", transport="http", input_data=str(trace)))
    with pytest.raises(UserError, match="line 1 has no prompt"):
        check_input_data(Load(input_data=str(trace)))  # the same file for Triton is prompts, and line 1 has none
    bad = tmp_path / "bad.jsonl"
    bad.write_text('"fine"\nnope\n')
    with pytest.raises(UserError) as err:
        check_input_data(Load(api="openai", transport="http", input_data=str(bad)))
    assert str(err.value).startswith(f"input data {bad}: line 2") and "\n" not in str(err.value)
