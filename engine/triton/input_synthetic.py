"""Synthetic prompts of given lengths for a streaming (LLM) model: load.input_tokens and
load.output_tokens, made before the first level as input data is.

The prompts themselves are engine/prompts.py's (shared with the OpenAI API: a word a token, a
fixed seed). The output length goes to the model through the
input its configuration names for it: the first of OUTPUT_LENGTH_INPUTS the model has (toy_llm's
MAX_TOKENS, TensorRT-LLM's request_output_len, max_tokens, max_new_tokens), an integer of that
input's datatype; or vLLM's BYTES ``sampling_parameters`` as JSON ``{"max_tokens": n}``. A model
with none of them is refused in one line, before any load. The prompts become input-data entries
(engine/triton/input_tensors.py), so the requests are made from them as from a file's.

A model whose input is text (``text_input``: a BYTES input named like a prompt) gets such prompts
by default, DEFAULT_WORDS words each, when neither input data nor a length is given: random
numbers are no prompt.
"""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np

from engine.errors import UserError
from engine.prompts import DEFAULT_WORDS, SEED, entry_count, lengths, prompt_text, synthetic_label
from engine.triton.input_tensors import DataEntry, DataModel, DataTensor, InputData, element

OUTPUT_LENGTH_INPUTS = ("max_tokens", "request_output_len", "max_new_tokens", "max_output_tokens", "output_len")
SAMPLING_PARAMETERS = "sampling_parameters"  # vLLM's backend: a JSON text of sampling settings
INTEGERS = {"INT32": np.int32, "INT64": np.int64, "UINT32": np.uint32, "UINT64": np.uint64, "INT16": np.int16}
TEXT_INPUTS = ("prompt", "text", "text_input", "input_text")  # names of a prompt input, any case


def text_input(inputs: dict[str, tuple[str, list[int]]]) -> str | None:
    """The model's prompt input: a BYTES input named one of TEXT_INPUTS (any case); None when it
    has none, so it is not a text model."""
    for name, (datatype, _) in inputs.items():
        if datatype == "BYTES" and name.lower() in TEXT_INPUTS:
            return name
    return None


def prompt_input(model: DataModel) -> str:
    """The input that takes the prompt: the one named like a prompt, else the model's one BYTES
    input besides sampling_parameters."""
    named = text_input(model.inputs)
    if named is not None:
        return named
    texts = [n for n, (datatype, _) in model.inputs.items() if datatype == "BYTES" and n.lower() != SAMPLING_PARAMETERS]
    if len(texts) != 1:
        found = ", ".join(texts) if texts else "none"
        raise UserError(f"load.input_tokens: synthetic prompts need a model with one BYTES (text) input, found {found}")
    return texts[0]


def length_input(model: DataModel) -> tuple[str, str]:
    """(name, datatype) of the input the output length goes to; one line naming what was looked for when none."""
    by_lower = {n.lower(): n for n in model.inputs}
    for wanted in OUTPUT_LENGTH_INPUTS:
        name = by_lower.get(wanted)
        if name is not None and model.inputs[name][0] in INTEGERS:
            return name, model.inputs[name][0]
    name = by_lower.get(SAMPLING_PARAMETERS)
    if name is not None and model.inputs[name][0] == "BYTES":
        return name, "BYTES"
    raise UserError(f"load.output_tokens: the model has no input for the output length (an integer input named one of "
                    f"{', '.join(OUTPUT_LENGTH_INPUTS)}, or a BYTES {SAMPLING_PARAMETERS}); its inputs: "
                    f"{model.names(False)}")


def _one_element_shape(model: DataModel, name: str, what: str) -> tuple[int, ...]:
    dims = model.wanted.get(name) or model.inputs[name][1]
    shape = tuple(1 if d < 0 else d for d in dims)
    if int(np.prod(shape)) != 1:
        raise UserError(f"{what}: input {name} takes shape {list(dims)}; synthetic prompts send one element")
    return shape


def synthetic_data(model: DataModel, input_tokens: object, output_tokens: object) -> InputData:
    """The prompts (and output lengths) as input-data entries; either length may be "" (not set:
    a short fixed prompt, or the model's own output length)."""
    count = entry_count(input_tokens, output_tokens)
    rng = random.Random(SEED)
    prompt = prompt_input(model)
    prompt_shape = _one_element_shape(model, prompt, "load.input_tokens")
    words = lengths(input_tokens, "input_tokens", count, rng) if input_tokens != "" else [DEFAULT_WORDS] * count
    outs = lengths(output_tokens, "output_tokens", count, rng) if output_tokens != "" else None
    target = length_input(model) if outs is not None else None
    target_shape = _one_element_shape(model, target[0], "load.output_tokens") if target is not None else ()
    entries = []
    for k in range(count):
        text = prompt_text(rng, words[k])
        inputs = {prompt: DataTensor("BYTES", prompt_shape, element(text.encode()))}
        if target is not None and outs is not None:
            name, datatype = target
            if datatype == "BYTES":
                raw = element(json.dumps({"max_tokens": outs[k]}).encode())
            else:
                raw = np.array([outs[k]], dtype=np.dtype(INTEGERS[datatype]).newbyteorder("<")).tobytes()
            inputs[name] = DataTensor(datatype, target_shape, raw)
        entries.append(DataEntry(inputs))
    label, spec = synthetic_label(input_tokens, output_tokens)
    return InputData(label, "synthetic", hashlib.sha256(spec.encode()).hexdigest(),
                     entries)
