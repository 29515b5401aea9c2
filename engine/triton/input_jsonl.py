"""load.input_data as prompts, one per line of a ``.jsonl`` file, for a text model (an LLM's prompt input).

Each non-empty line is a JSON string (the prompt) or an object with the prompt under ``text``
(or ``prompt``); an object may also name other inputs of the model with their values, as an
entry of perf_analyzer's input-data JSON does (``{"text": "Hi", "MAX_TOKENS": [16]}``). The
prompt goes to the model's one BYTES input. Each line becomes one entry of that JSON
(engine/triton/input_json.py reads it), so the rules and the one-line errors are the same; a
line that is not JSON, holds no prompt, or a model without exactly one BYTES input to take it,
is one line naming the file and the line, before any load.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from engine.errors import UserError
from engine.triton.input_json import parse_document
from engine.triton.input_tensors import DataModel, InputData, read_file

PROMPT_KEYS = ("text", "prompt")


def prompt_input(model: DataModel, where: str) -> str:
    """The model's input that takes the prompt: its one BYTES input."""
    texts = [name for name, (datatype, _) in model.inputs.items() if datatype == "BYTES"]
    if len(texts) != 1:
        found = ", ".join(texts) if texts else "none"
        raise UserError(f"{where}: prompts need a model with one BYTES (text) input, found {found}")
    return texts[0]


def entry_of(line: str, number: int, prompt: str, where: str) -> dict[str, Any]:
    """One line as an entry of perf_analyzer's input-data JSON."""
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise UserError(f"{where}: line {number} is not JSON ({getattr(exc, 'msg', exc)})") from None
    if isinstance(value, str):
        return {prompt: [value]}
    if not isinstance(value, dict):
        raise UserError(f"{where}: line {number} is neither a string nor an object")
    keys = [k for k in PROMPT_KEYS if k in value]
    if not keys or not isinstance(value[keys[0]], str):
        raise UserError(f"{where}: line {number} has no prompt (a string under 'text' or 'prompt')")
    entry = {k: v for k, v in value.items() if k not in PROMPT_KEYS}
    entry[prompt] = [value[keys[0]]]
    return entry


def prompt_entries(raw: bytes, prompt: str, label: str) -> list[dict[str, Any]]:
    """Each line of ``raw`` as an entry giving its prompt to the input ``prompt``; one line naming
    the file and the line for the first that is not a prompt, or for a file with none."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{label}: not JSON Lines (not UTF-8 text)") from None
    data = [entry_of(line, n, prompt, label) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not data:
        raise UserError(f"{label}: no prompt in it (one JSON string or object per line)")
    return data


def read_jsonl(where: Path, path: str, model: DataModel, notes: list[str]) -> InputData:
    """The prompts of the file at ``where`` as input-data entries for ``model``."""
    label = f"input data {path}"
    raw = read_file(where, label)
    data = prompt_entries(raw, prompt_input(model, label), label)
    entries = parse_document({"data": data}, model, label, notes)
    return InputData(str(where.resolve()), "jsonl", hashlib.sha256(raw).hexdigest(), entries, tuple(notes))
