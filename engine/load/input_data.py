"""load.input_data: real input values from a file or folder, read as perf_analyzer reads its
``--input-data`` (its docs/input_data.md), into entries of raw tensor bytes.

- A JSON file: ``{"data": [entry, ...], "validation_data": [entry, ...]}``. Each entry names
  every input (optional ones may be left out) with a flat list of values, ``{"content": [...],
  "shape": [...]}``, ``{"b64": "..."}`` or ``{"content": {"b64": "..."}, "shape": [...]}``.
  BYTES values are strings, or base64 of 4-byte-length-prefixed elements. ``validation_data``,
  when given, aligns with ``data``: the outputs expected for each entry.
- A folder: a file named after each input holds its raw little-endian bytes (for BYTES, a text
  file with one element per line), as in perf_analyzer's folder mode (one entry). Beyond it: a
  folder named after an input holds one file per entry (for BYTES, one file per element, e.g.
  JPEG photos), cycled over requests. Files named after outputs are their expected values.

An entry is one batch element (the model's shape without its batch dimension; for
``max_batch_size`` 0, the whole tensor), as perf_analyzer's; engine/load/request_set.py makes
requests of them. Shapes: the entry's ``shape``, else load.input_shapes, else the model's; a
single variable dimension left is taken from the element count. Anything wrong is one line
naming the entry and the input (UserError), before any load is sent. Pure apart from reading
the path: no server, no clock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import UserError
from engine.load.answer_check import ITEM_SIZE
from engine.load.request import NUMPY_DTYPES
from engine.load.target import TargetInfo

MAX_DATA_BYTES = 2 << 30  # a data file, or a folder's files together, larger than this is refused
IGNORED_KEYS = {"model"}  # perf_analyzer allows it in an entry (its multi-model mode); it names no tensor


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

    @property
    def validated(self) -> bool:
        return any(e.expected for e in self.entries)


def check_readable(path: str) -> None:
    """What can be checked without the model: the path is there, readable, not over the limit."""
    where = Path(path).expanduser()
    if not where.exists():
        raise UserError(f"input data {path}: no such file or folder")
    if where.is_dir():
        if not os.access(where, os.R_OK | os.X_OK):
            raise UserError(f"input data {path}: cannot read the folder")
        return
    try:
        size = where.stat().st_size
        with where.open("rb"):
            pass
    except OSError as exc:
        raise UserError(f"input data {path}: cannot read it: {exc.strerror or exc}") from None
    if size > MAX_DATA_BYTES:
        raise UserError(f"input data {path}: {size} bytes, over the {MAX_DATA_BYTES >> 30} GiB limit")


def read_input_data(path: str, info: TargetInfo, input_shapes: dict[str, list[int]] | None = None) -> InputData:
    """The entries of the JSON file or folder at ``path`` for the model ``info`` describes."""
    where = Path(path).expanduser()
    if not where.exists():
        raise UserError(f"input data {path}: no such file or folder")
    model = _Model(info, input_shapes or {})
    if where.is_dir():
        return _read_folder(where.resolve(), model)
    raw = _read_file(where, f"input data {path}")
    try:
        doc = json.loads(raw)
    except UnicodeDecodeError:
        raise UserError(f"input data {path}: not JSON (not UTF-8 text)") from None
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        raise UserError(f"input data {path}: not JSON ({msg} at line {getattr(exc, 'lineno', '?')})") from None
    except RecursionError:
        raise UserError(f"input data {path}: not JSON (nested too deep)") from None
    entries = parse_document(doc, model, f"input data {path}")
    return InputData(str(where.resolve()), "json", hashlib.sha256(raw).hexdigest(), entries)


# --------------------------------------------------------------------------- the model's tensors


class _Model:
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


# --------------------------------------------------------------------------- JSON


def parse_document(doc: Any, model: _Model, where: str) -> list[DataEntry]:
    """perf_analyzer's input-data JSON, already parsed, into entries."""
    if not isinstance(doc, dict) or "data" not in doc:
        raise UserError(f"{where}: expected a JSON object with a 'data' list")
    data, validation = doc["data"], doc.get("validation_data")
    if not isinstance(data, list):
        raise UserError(f"{where}: 'data' is not a list")
    if not data:
        raise UserError(f"{where}: 'data' is empty: no entry to send")
    if validation is not None and (not isinstance(validation, list) or len(validation) != len(data)):
        found = f"{len(validation)} entries" if isinstance(validation, list) else "not a list"
        raise UserError(f"{where}: 'validation_data' must align with 'data' ({len(data)} entries), found {found}")
    entries = []
    for k, step in enumerate(data):
        if isinstance(step, list):
            raise UserError(f"{where}: entry {k} is a list: sequence streams (for sequence models) are not supported")
        inputs = _tensors(step, model, k, where, outputs=False)
        expected = _tensors(validation[k], model, k, where, outputs=True) if validation is not None else {}
        entries.append(DataEntry(inputs, expected))
    return entries


def _tensors(step: Any, model: _Model, k: int, where: str, outputs: bool) -> dict[str, DataTensor]:
    what = "validation_data" if outputs else "data"
    if not isinstance(step, dict):
        raise UserError(f"{where}: {what} entry {k} is not an object of tensor names")
    known = model.outputs if outputs else model.inputs
    for name in step:
        if name not in known and name not in IGNORED_KEYS:
            kind = "output" if outputs else "input"
            raise UserError(f"{where}: {what} entry {k} names {kind} {name!r}, which the model does not have "
                            f"({kind}s: {model.names(outputs)})")
    if not outputs:
        missing = [name for name in model.required if name not in step]
        if missing:
            raise UserError(f"{where}: entry {k} lacks input {missing[0]!r}")
    found = {}
    for name, value in step.items():
        if name in IGNORED_KEYS:
            continue
        label = f"{where}: {what} entry {k}, {'output' if outputs else 'input'} {name!r}"
        datatype, dims = known[name]
        found[name] = _tensor(value, datatype, dims, model.wanted.get(name) if not outputs else None, label)
    return found


def _tensor(value: Any, datatype: str, dims: list[int], wanted: list[int] | None, label: str) -> DataTensor:
    """One tensor of an entry: a list, {"content": ..., "shape": ...} or {"b64": ...}."""
    shape = None
    content = value
    if isinstance(value, dict):
        if "shape" in value:
            shape = value["shape"]
            if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                      for d in shape):
                raise UserError(f"{label}: 'shape' must be a list of non-negative integers, found {_short(shape)}")
        if "b64" in value:
            content = value
        elif "content" in value:
            content = value["content"]
        else:
            raise UserError(f"{label}: expected 'content' or 'b64' in {_short(value)}")
    if isinstance(content, list):
        raw, count = encode_values(content, datatype, label)
    elif isinstance(content, dict) and "b64" in content:
        raw, count = _decode_b64(content["b64"], datatype, label)
    else:
        raise UserError(f"{label}: expected a list of values or {{\"b64\": ...}}, found {_short(content)}")
    return DataTensor(datatype, tuple(entry_shape(shape, dims, wanted, count, label)), raw)


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


def encode_values(values: list[Any], datatype: str, label: str) -> tuple[bytes, int]:
    """A JSON list of values (nested lists are flattened, row-major) as raw bytes, and its
    element count; a value the datatype cannot hold is the user's error."""
    flat = _flatten(values, label)
    if datatype == "BYTES":
        if not all(isinstance(v, str) for v in flat):
            bad = next(v for v in flat if not isinstance(v, str))
            raise UserError(f"{label}: BYTES values must be strings, found {_short(bad)}")
        return b"".join(_element(v.encode()) for v in flat), len(flat)
    try:
        array = np.asarray(flat) if flat else np.zeros(0)
    except (ValueError, OverflowError):
        raise UserError(f"{label}: values that are not numbers of one kind") from None
    kind = array.dtype.kind
    if datatype == "BOOL":
        if kind != "b" and not (kind in "iu" and set(np.unique(array).tolist()) <= {0, 1}):
            raise UserError(f"{label}: BOOL values must be true/false (or 0/1), found {_first_bad(flat)}")
        return array.astype(np.bool_).tobytes(), len(flat)
    if datatype in ("FP16", "FP32", "FP64", "BF16"):
        if kind not in "iuf" or any(isinstance(v, bool) for v in flat):
            raise UserError(f"{label}: {datatype} values must be numbers, found {_first_bad(flat)}")
        if datatype == "BF16":
            return bf16_bytes(array.astype(np.float32)), len(flat)
        return array.astype(np.dtype(NUMPY_DTYPES[datatype]).newbyteorder("<")).tobytes(), len(flat)
    dtype = NUMPY_DTYPES.get(datatype)
    if dtype is None:
        raise UserError(f"{label}: datatype {datatype!r} is not supported")
    if flat and kind not in "iu" and all(isinstance(v, int) and not isinstance(v, bool) for v in flat):
        worst = max(flat, key=abs)  # integers numpy cannot hold in one 64-bit type
        raise UserError(f"{label}: value {worst} does not fit {datatype}")
    if flat and (kind not in "iu" or any(isinstance(v, bool) for v in flat)):
        raise UserError(f"{label}: {datatype} values must be integers, found {_first_bad(flat, integers=True)}")
    limits = np.iinfo(dtype)  # type: ignore[type-var]  # an integer dtype here
    if flat and (int(array.min()) < limits.min or int(array.max()) > limits.max):
        worst = int(array.min()) if int(array.min()) < limits.min else int(array.max())
        raise UserError(f"{label}: value {worst} does not fit {datatype} ({limits.min} to {limits.max})")
    return array.astype(np.dtype(dtype).newbyteorder("<")).tobytes(), len(flat)


def bf16_bytes(floats: np.ndarray) -> bytes:
    """FP32 values as BF16 (the upper 16 bits), rounded to nearest even."""
    bits = floats.astype("<f4").view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def _decode_b64(text: Any, datatype: str, label: str) -> tuple[bytes, int]:
    if not isinstance(text, str):
        raise UserError(f"{label}: 'b64' must be a string, found {_short(text)}")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise UserError(f"{label}: bad base64") from None
    if datatype == "BYTES":
        count = bytes_elements(raw)
        if count is None:
            raise UserError(f"{label}: BYTES data must be elements each after a 4-byte little-endian length")
        return raw, count
    size = ITEM_SIZE.get(datatype)
    if size is None:
        raise UserError(f"{label}: datatype {datatype!r} is not supported")
    if len(raw) % size:
        raise UserError(f"{label}: {len(raw)} bytes are not a whole number of {datatype} elements ({size} bytes each)")
    return raw, len(raw) // size


def bytes_elements(raw: bytes) -> int | None:
    """How many length-prefixed BYTES elements ``raw`` holds exactly; None if it is not that."""
    count = at = 0
    while at < len(raw):
        if at + 4 > len(raw):
            return None
        at += 4 + int.from_bytes(raw[at : at + 4], "little")
        count += 1
    return count if at == len(raw) else None


def _element(value: bytes) -> bytes:
    return len(value).to_bytes(4, "little") + value


def _flatten(values: list[Any], label: str) -> list[Any]:
    if not any(isinstance(v, list) for v in values):
        return values
    out: list[Any] = []
    stack = [iter(values)]
    while stack:
        for v in stack[-1]:
            if isinstance(v, list):
                if len(stack) > 64:
                    raise UserError(f"{label}: lists nested too deep")
                stack.append(iter(v))
                break
            out.append(v)
        else:
            stack.pop()
    return out


def _first_bad(flat: list[Any], integers: bool = False) -> str:
    for v in flat:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (integers and not isinstance(v, int)):
            return _short(v)
    return "values of mixed kinds"


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- folder


def _read_folder(folder: Path, model: _Model) -> InputData:
    """perf_analyzer's folder mode, and a folder per input holding one file per entry (BYTES:
    one file per element)."""
    where = f"input data {folder}"
    names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    for name in names:
        if name not in model.inputs and name not in model.outputs:
            raise UserError(f"{where}: {name!r} is neither an input nor an output of the model "
                            f"(inputs: {model.names(False)}; outputs: {model.names(True)})")
    for name in names:
        if not (folder / name).is_file() and not (folder / name).is_dir():
            raise UserError(f"{where}: {name!r} is neither a file nor a folder")
    files = sorted(p for n in names for p in ([folder / n] if (folder / n).is_file() else _files(folder / n)))
    total = sum(p.stat().st_size for p in files)
    if total > MAX_DATA_BYTES:
        raise UserError(f"{where}: its files hold {total} bytes, over the {MAX_DATA_BYTES >> 30} GiB limit")
    for name in model.required:
        if name not in names:
            raise UserError(f"{where}: no file or folder named after input {name!r}")
    contents = {p: _read_file(p, where) for p in files}  # each file read once
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(folder)).encode() + b"\0" + contents[p])
    inputs = {name: _folder_tensors(folder / name, datatype, dims, model.wanted.get(name), f"{where}: input {name!r}",
                                    contents)
              for name, (datatype, dims) in model.inputs.items() if name in names}
    expected = {name: _folder_tensors(folder / name, datatype, dims, None, f"{where}: output {name!r}", contents)
                for name, (datatype, dims) in model.outputs.items() if name in names}
    count = max(len(items) for items in (*inputs.values(), *expected.values()))
    entries = [DataEntry({n: items[k % len(items)] for n, items in inputs.items()},
                         {n: items[k % len(items)] for n, items in expected.items()}) for k in range(count)]
    return InputData(str(folder), "folder", digest.hexdigest(), entries)


def _folder_tensors(path: Path, datatype: str, dims: list[int], wanted: list[int] | None, label: str,
                    contents: dict[Path, bytes]) -> list[DataTensor]:
    """The tensors a file (one) or a folder (one per file; BYTES: one element per file) gives."""
    if path.is_file():
        raw = contents[path]
        if datatype == "BYTES":  # perf_analyzer: a text file, one element per line
            lines = raw.decode("utf-8", "surrogateescape").splitlines()
            raw, count = b"".join(_element(line.encode("utf-8", "surrogateescape")) for line in lines), len(lines)
        else:
            count = _whole_elements(raw, datatype, label)
        return [DataTensor(datatype, tuple(entry_shape(None, dims, wanted, count, label)), raw)]
    files = _files(path)
    if not files:
        raise UserError(f"{label}: the folder {path.name!r} holds no file")
    if datatype != "BYTES":
        out = []
        for p in files:
            raw = contents[p]
            count = _whole_elements(raw, datatype, f"{label}, file {p.name!r}")
            out.append(DataTensor(datatype, tuple(entry_shape(None, dims, wanted, count, f"{label}, file {p.name!r}")), raw))
        return out
    shape = wanted if wanted is not None else [1 if d < 0 else d for d in dims]
    per_entry = math.prod(shape)
    if per_entry < 1:
        raise UserError(f"{label}: shape {shape} holds no element")
    elements = [_element(contents[p]) for p in files]
    entries = math.ceil(len(elements) / per_entry)
    return [DataTensor(datatype, tuple(shape), b"".join(elements[(k * per_entry + j) % len(elements)]
                                                         for j in range(per_entry))) for k in range(entries)]


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def _whole_elements(raw: bytes, datatype: str, label: str) -> int:
    size = ITEM_SIZE.get(datatype)
    if size is None:
        raise UserError(f"{label}: datatype {datatype!r} is not supported")
    if len(raw) % size:
        raise UserError(f"{label}: {len(raw)} bytes are not a whole number of {datatype} elements ({size} bytes each)")
    return len(raw) // size


def _read_file(path: Path, label: str) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_DATA_BYTES:
            raise UserError(f"{label}: {path.name} is {size} bytes, over the {MAX_DATA_BYTES >> 30} GiB limit")
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"{label}: cannot read {path.name}: {exc.strerror or exc}") from None
