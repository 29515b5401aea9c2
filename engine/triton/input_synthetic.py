"""Synthetic prompts of given lengths for a streaming (LLM) model: load.input_tokens and
load.output_tokens, made before the first level as input data is.

A prompt of n tokens is n words of a fixed vocabulary (a word a token, as a word-level tokenizer
counts them; a model's own tokenizer may count a few more). Each length is drawn uniformly from
mean - spread to mean + spread with a fixed seed, so that two runs send the same prompts;
without a spread every prompt has the mean. The output length goes to the model through the
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
from engine.profiles import token_count
from engine.triton.input_tensors import DataEntry, DataModel, DataTensor, InputData, element

OUTPUT_LENGTH_INPUTS = ("max_tokens", "request_output_len", "max_new_tokens", "max_output_tokens", "output_len")
SAMPLING_PARAMETERS = "sampling_parameters"  # vLLM's backend: a JSON text of sampling settings
INTEGERS = {"INT32": np.int32, "INT64": np.int64, "UINT32": np.uint32, "UINT64": np.uint64, "INT16": np.int16}
TEXT_INPUTS = ("prompt", "text", "text_input", "input_text")  # names of a prompt input, any case
DEFAULT_WORDS = 8  # a prompt's words when load.input_tokens is not set
ENTRIES = 64  # distinct prompts when a length has a spread (one without)
SEED = 42
WORDS = ("the", "river", "stone", "light", "morning", "garden", "window", "quiet", "paper", "yellow", "market",
         "winter", "music", "silver", "forest", "letter", "bridge", "summer", "orange", "valley", "story", "cloud",
         "engine", "harbor", "lantern", "meadow", "pocket", "rabbit", "signal", "thunder", "velvet", "whistle")


def lengths(text: object, key: str, count: int, rng: random.Random) -> list[int]:
    """``count`` lengths for the profile's ``key`` ("128" or "128+-32")."""
    parsed = token_count(text)
    if parsed is None:  # the profile's check refuses it first; a caller passing its own text gets the line too
        raise UserError(f"load.{key}: expected a token count, e.g. 128 or '128+-32', found {text!r}")
    mean, spread = parsed
    return [rng.randint(mean - spread, mean + spread) for _ in range(count)]


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
    parsed = [token_count(t) for t in (input_tokens, output_tokens) if t != ""]
    spread = any(p is not None and p[1] > 0 for p in parsed)
    count = ENTRIES if spread else 1
    rng = random.Random(SEED)
    prompt = prompt_input(model)
    prompt_shape = _one_element_shape(model, prompt, "load.input_tokens")
    words = lengths(input_tokens, "input_tokens", count, rng) if input_tokens != "" else [DEFAULT_WORDS] * count
    outs = lengths(output_tokens, "output_tokens", count, rng) if output_tokens != "" else None
    target = length_input(model) if outs is not None else None
    target_shape = _one_element_shape(model, target[0], "load.output_tokens") if target is not None else ()
    entries = []
    for k in range(count):
        text = " ".join(WORDS[rng.randrange(len(WORDS))] for _ in range(words[k]))
        inputs = {prompt: DataTensor("BYTES", prompt_shape, element(text.encode()))}
        if target is not None and outs is not None:
            name, datatype = target
            if datatype == "BYTES":
                raw = element(json.dumps({"max_tokens": outs[k]}).encode())
            else:
                raw = np.array([outs[k]], dtype=np.dtype(INTEGERS[datatype]).newbyteorder("<")).tobytes()
            inputs[name] = DataTensor(datatype, target_shape, raw)
        entries.append(DataEntry(inputs))
    spec = f"input_tokens={input_tokens!s} output_tokens={output_tokens!s} seed={SEED} entries={count}"
    label = (f"synthetic ({spec.split(' seed')[0]})" if input_tokens != "" or output_tokens != ""
             else f"synthetic text prompts ({DEFAULT_WORDS} words; load.input_tokens sets the length)")
    return InputData(label, "synthetic", hashlib.sha256(spec.encode()).hexdigest(),
                     entries)
