"""Triton's model config, protobuf text format -> the JSON that Triton's repository API takes as a
load "config" parameter. Only what model configs use: messages, scalars, enums, lists, and the
``parameters`` map. Which fields repeat cannot be told from the text when a repeated field is
written once, so the repeated fields of ModelConfig are listed (model_config.proto)."""

from __future__ import annotations

import re
from typing import Any

from engine.errors import UserError

REPEATED = frozenset({
    "input", "output", "instance_group", "gpus", "dims", "preferred_batch_size", "batch_input", "batch_output",
    "secondary_devices", "profile", "model_warmup", "allow_ragged_batch_dims", "shape", "control_input",
    "control", "state", "initial_state", "ensemble_scheduling", "step", "gpu_execution_accelerator",
    "cpu_execution_accelerator", "model_transaction_policy", "versions", "source_input",
})
MAPS = frozenset({"parameters", "input_map", "output_map", "cc_model_filenames", "metric_tags",
                  "priority_queue_policy"})
_TOKEN = re.compile(r'\s+|#[^\n]*|"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[{}\[\]:,;<>]|[^\s{}\[\]:,;<>"\'#]+')


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise UserError(f"model config: cannot read {text[pos:pos + 20]!r}")
        token = match.group(0)
        pos = match.end()
        if not token.isspace() and not token.startswith("#"):
            out.append(token)
    return out


def _scalar(token: str) -> Any:
    if token[0] in "\"'":
        return bytes(token[1:-1], "utf-8").decode("unicode_escape")
    if token in ("true", "True"):
        return True
    if token in ("false", "False"):
        return False
    try:
        return int(token)
    except ValueError:
        pass
    try:
        return float(token)
    except ValueError:
        return token  # an enum name: KIND_GPU, TYPE_FP32


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise UserError(f"model config: expected {expected or 'a value'}, found {token or 'the end'}")
        self.i += 1
        return token

    def message(self, end: str | None) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        while self.peek() != end:
            name = self.take()
            if self.peek() == ":":
                self.take(":")
            value = self.value()
            if self.peek() in (",", ";"):
                self.take()
            self.add(fields, name, value)
        if end is not None:
            self.take(end)
        return fields

    def value(self) -> Any:
        token = self.peek()
        if token in ("{", "<"):
            self.take()
            return self.message("}" if token == "{" else ">")
        if token == "[":
            self.take("[")
            items = []
            while self.peek() != "]":
                items.append(self.value())
                if self.peek() == ",":
                    self.take(",")
            self.take("]")
            return items
        return _scalar(self.take())

    @staticmethod
    def add(fields: dict[str, Any], name: str, value: Any) -> None:
        if name in MAPS and isinstance(value, (dict, list)):
            entries = value if isinstance(value, list) else [value]
            target = fields.setdefault(name, {})
            for entry in entries:
                if "key" not in entry:
                    raise UserError(f"model config: {name} entry without a key")
                target[str(entry["key"])] = entry.get("value")
            return
        if name in REPEATED:
            fields.setdefault(name, []).extend(value if isinstance(value, list) else [value])
        elif name in fields:
            raise UserError(f"model config: field {name} given twice")
        else:
            fields[name] = value


def pbtxt_to_json(text: str) -> dict[str, Any]:
    """The config as Triton's JSON form (model_config.proto field names, enums as names)."""
    return _Parser(text).message(None)
