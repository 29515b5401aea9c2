"""Which model takes text: a BYTES input named like a prompt gets synthetic text prompts by
default, never random numbers (the real server's side: test_streaming_models.py)."""

from __future__ import annotations

from engine.triton.input_synthetic import DEFAULT_WORDS, synthetic_data, text_input
from engine.triton.input_tensors import DataModel
from engine.triton.target import TargetInfo


def _info(*inputs: tuple[str, str]) -> TargetInfo:
    return TargetInfo(model_config={}, inputs=[{"name": n, "datatype": d, "shape": [1]} for n, d in inputs],
                      outputs=[], max_batch_size=0)


def test_a_bytes_input_named_like_a_prompt_is_text() -> None:
    for name in ("PROMPT", "prompt", "text", "TEXT_INPUT", "input_text"):
        assert text_input({name: ("BYTES", [1]), "MAX_TOKENS": ("INT32", [1])}) == name


def test_other_inputs_are_not_text() -> None:
    assert text_input({"PROMPT": ("INT64", [1])}) is None  # token ids, not text
    assert text_input({"image": ("BYTES", [1])}) is None  # bytes, not named as a prompt
    assert text_input({"INPUT0": ("FP32", [16])}) is None
    assert text_input({}) is None


def test_the_default_prompt_is_words_of_a_stated_length() -> None:
    model = DataModel(_info(("PROMPT", "BYTES"), ("MAX_TOKENS", "INT32")), {})
    data = synthetic_data(model, "", "")
    (entry,) = data.entries
    raw = entry.inputs["PROMPT"].raw
    words = raw[4:].decode().split()  # after the BYTES element's length
    assert len(words) == DEFAULT_WORDS and all(w.isalpha() for w in words)
    assert "MAX_TOKENS" not in entry.inputs  # the model's own output length
    assert data.kind == "synthetic"
