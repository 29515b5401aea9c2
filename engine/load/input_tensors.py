"""The tensors of load.input_data (engine/load/input_data.py): what an entry holds, what the
model asks of it, and the rules the JSON file and the folder share (shapes, BYTES elements,
reading a file within the size limit)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import UserError
from engine.load.answer_check import ITEM_SIZE
from engine.load.answer_values import bytes_elements as split_bytes
from engine.load.target import TargetInfo

MAX_DATA_BYTES = 2 << 30  # a data file, or a folder's files together, larger than this is refused


@dataclass(frozen=True)
class DataTensor:
    """One tensor of one entry: the model's datatype, the entry's shape, raw little-endian bytes
    (BYTES: each element a 4-byte little-endian length, then its bytes)."""

    datatype: str
    shape: tuple[int, ...]
    raw: bytes


@dataclass(frozen=True)
class DataEntry:
    inputs: dict[str, DataTensor]  # an optional input left out is absent
    expected: dict[str, DataTensor] = field(default_factory=dict)  # validation data (outputs)


@dataclass(frozen=True)
class InputData:
    """What was read, and what a recording says of it."""

    path: str  # absolute
    kind: str  # "json" or "folder"
    sha256: str  # of the file; of a folder, its files' relative paths and bytes in sorted order
    entries: list[DataEntry]
    notes: tuple[str, ...] = ()  # names the data gives that the model lacks, left out: shown as warnings

    @property
    def validated(self) -> bool:
        return any(e.expected for e in self.entries)


class DataModel:
    """What the data must fit: each tensor's datatype and its entry shape (batch dimension left
    out when the model batches), the model's and the one the user asked for."""

    def __init__(self, info: TargetInfo, input_shapes: dict[str, list[int]]) -> None:
        batched = info.max_batch_size > 0

        def dims(tensor: dict[str, Any]) -> list[int]:
            shape = [int(d) for d in tensor.get("shape", [])]
            return shape[1:] if batched and shape else shape

        self.inputs = {t["name"]: (str(t["datatype"]), dims(t)) for t in info.inputs}
        self.outputs = {t["name"]: (str(t.get("datatype") or ""), dims(t)) for t in info.outputs}
        self.wanted = {name: list(shape) for name, shape in input_shapes.items()}
        optional = {str(t.get("name")) for t in (info.model_config or {}).get("input", [])
                    if isinstance(t, dict) and t.get("optional")}
        self.required = [name for name in self.inputs if name not in optional]

    def names(self, outputs: bool) -> str:
        return ", ".join(sorted(self.outputs if outputs else self.inputs)) or "none"


def entry_shape(given: list[int] | None, dims: list[int], wanted: list[int] | None, count: int, label: str) -> list[int]:
    """The entry's shape: ``given`` (checked against the model's ``dims`` as perf_analyzer
    checks it), else ``wanted`` (load.input_shapes), else ``dims``; one variable dimension left
    is taken from ``count``, the elements the data holds, which the shape must hold exactly."""
    if given is not None:
        if len(given) != len(dims) or any(d >= 0 and g != d for g, d in zip(given, dims, strict=False)):
            raise UserError(f"{label}: shape {given} does not fit the model's {dims}")
        shape = list(given)
    else:
        shape = list(wanted) if wanted is not None else list(dims)
        variable = [i for i, d in enumerate(shape) if d < 0]
        if len(variable) > 1:
            raise UserError(f"{label}: the model's shape {dims} has variable dimensions: give a 'shape' in the data "
                            "or set load.input_shapes")
        if variable:
            rest = math.prod(d for d in shape if d >= 0)
            if rest == 0 or count % rest:
                raise UserError(f"{label}: {count} elements do not fill shape {dims}")
            shape[variable[0]] = count // rest
    if math.prod(shape) != count:
        raise UserError(f"{label}: {count} elements where shape {shape} holds {math.prod(shape)}")
    return shape


def bytes_elements(raw: bytes) -> int | None:
    """How many length-prefixed BYTES elements ``raw`` holds exactly; None if it is not that."""
    elements = split_bytes(raw)
    return None if elements is None else len(elements)


def element(value: bytes) -> bytes:
    return len(value).to_bytes(4, "little") + value


def whole_elements(raw: bytes, datatype: str, label: str) -> int:
    size = ITEM_SIZE.get(datatype)
    if size is None:
        raise UserError(f"{label}: datatype {datatype!r} is not supported")
    if len(raw) % size:
        raise UserError(f"{label}: {len(raw)} bytes are not a whole number of {datatype} elements ({size} bytes each)")
    return len(raw) // size


def read_file(path: Path, label: str) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_DATA_BYTES:
            raise UserError(f"{label}: {path.name} is {size} bytes, over the {MAX_DATA_BYTES >> 30} GiB limit")
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"{label}: cannot read {path.name}: {exc.strerror or exc}") from None


def short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
