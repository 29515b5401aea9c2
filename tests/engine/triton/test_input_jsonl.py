"""Prompts from a JSON Lines file (load.input_data ending in .jsonl), read for a text model."""

from __future__ import annotations

import pytest

from engine.errors import UserError
from engine.triton.input_data import read_input_data
from engine.triton.target import TargetInfo

TOY_LLM = TargetInfo(
    model_config={"input": [{"name": "PROMPT"}, {"name": "MAX_TOKENS", "optional": True}]},
    inputs=[{"name": "PROMPT", "datatype": "BYTES", "shape": [1]},
            {"name": "MAX_TOKENS", "datatype": "INT32", "shape": [1]}],
    outputs=[{"name": "TOKEN", "datatype": "BYTES", "shape": [1]}],
    max_batch_size=0,
)


def _write(tmp_path, text: str):
    path = tmp_path / "prompts.jsonl"
    path.write_text(text)
    return str(path)


def _element(text: str) -> bytes:
    data = text.encode()
    return len(data).to_bytes(4, "little") + data


def test_each_line_is_one_prompt_with_the_other_inputs_it_names(tmp_path) -> None:
    path = _write(tmp_path, '"Hello there"\n\n{"text": "Tell me a story", "MAX_TOKENS": [4]}\n{"prompt": "Hi"}\n')
    data = read_input_data(path, TOY_LLM)
    assert data.kind == "jsonl" and len(data.entries) == 3
    first, second, third = data.entries
    assert first.inputs["PROMPT"].raw == _element("Hello there") and "MAX_TOKENS" not in first.inputs
    assert second.inputs["PROMPT"].raw == _element("Tell me a story")
    assert second.inputs["MAX_TOKENS"].raw == (4).to_bytes(4, "little")
    assert third.inputs["PROMPT"].raw == _element("Hi")


@pytest.mark.parametrize(("text", "says"), [
    ("", "no prompt in it"),
    ('"fine"\n{"text": \n', "line 2 is not JSON"),
    ('{"question": "where is it?"}\n', "line 1 has no prompt"),
    ("[1, 2]\n", "line 1 is neither a string nor an object"),
    ('{"text": "hi", "MAX_TOKENS": ["many"]}\n', "MAX_TOKENS"),
])
def test_a_bad_prompt_file_is_one_line(tmp_path, text: str, says: str) -> None:
    with pytest.raises(UserError) as caught:
        read_input_data(_write(tmp_path, text), TOY_LLM)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_model_without_one_text_input_cannot_take_prompts(tmp_path) -> None:
    info = TargetInfo(model_config={}, inputs=[{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16]}],
                      outputs=[], max_batch_size=8)
    with pytest.raises(UserError, match="one BYTES \\(text\\) input, found none"):
        read_input_data(_write(tmp_path, '"hello"\n'), info)
