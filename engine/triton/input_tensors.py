"""The tensors of load.input_data (engine/triton/input_data.py): what an entry holds, what the
model asks of it, and the rules the JSON file and the folder share (shapes, BYTES elements,
reading a file within the size limit)."""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import UserError
from engine.triton.answer_check import ITEM_SIZE
from engine.triton.answer_values import bytes_elements as split_bytes
from engine.triton.target import TargetInfo

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
    streams: tuple[int, ...] = ()  # sequence streams: steps per stream, the entries in their order; () none

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
        # a sequence model's control inputs (name -> kind): Triton fills them, the data must not
        batching = (info.model_config or {}).get("sequence_batching")
        self.sequence = isinstance(batching, dict)  # Triton's sequence batcher: the data may be streams
        self.controls = {str(item.get("name")): str(c.get("kind")) for item in (batching or {}).get("control_input") or []
                         if isinstance(item, dict) for c in item.get("control") or [] if isinstance(c, dict)}

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


def file_kind(mode: int) -> str | None:
    """What a path that is neither a regular file nor a folder is, in words; None if it is one."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kinds = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((words for test, words in kinds if test(mode)), "not a regular file")


def read_file(path: Path, label: str) -> bytes:
    """A regular file's bytes, at most MAX_DATA_BYTES of them. A named pipe, a device (a link to
    /dev/zero reports 0 bytes and never ends) or a socket is refused before it is opened, and the
    read stops past the limit whatever the size said."""
    try:
        kind = file_kind(os.stat(path).st_mode)
        if kind is not None:
            raise UserError(f"{label}: {path.name} is {kind}, not a regular file")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a pipe swapped in after the check: no hang
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise UserError(f"{label}: {path.name} is {file_kind(info.st_mode)}, not a regular file")
            if info.st_size > MAX_DATA_BYTES:
                raise UserError(f"{label}: {path.name} is {info.st_size} bytes, over the {MAX_DATA_BYTES >> 30} GiB limit")
            raw = f.read(MAX_DATA_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{label}: cannot read {path.name}: {exc.strerror or exc}") from None
    if len(raw) > MAX_DATA_BYTES:
        raise UserError(f"{label}: {path.name} holds over {MAX_DATA_BYTES >> 30} GiB, the limit")
    return raw


def short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
