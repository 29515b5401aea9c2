"""perf_analyzer's input-data JSON (its docs/input_data.md) into entries: ``data``, a list of
entries naming each input as a flat list of values, ``{"content": [...], "shape": [...]}``,
``{"b64": "..."}`` or ``{"content": {"b64": "..."}, "shape": [...]}``; BYTES values as strings
(or base64 of length-prefixed elements); ``validation_data`` aligned with it, naming outputs.
Values the datatype cannot hold are the user's error, named with the entry and the input.

For sequence models, perf_analyzer's "streams": each entry of ``data`` a list of steps (one
sequence), each step an object of inputs, ``validation_data`` in the same shape; the steps become
entries in order and ``streams`` gets each stream's length. A problem names the entry and step."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from engine.errors import UserError
from engine.triton.answer_check import ITEM_SIZE
from engine.triton.input_decode import NotNumbers, Numbers
from engine.triton.input_tensors import (
    DataEntry,
    DataModel,
    DataTensor,
    bytes_elements,
    element,
    entry_shape,
    short,
)
from engine.triton.request import NUMPY_DTYPES

IGNORED_KEYS = {"model"}  # perf_analyzer allows it in an entry (its multi-model mode); it names no tensor
FLOATS = ("FP16", "FP32", "FP64", "BF16")
# files we run that perf_analyzer 2.41 refuses, and the rule we run them under (docs/input_data.md)
PA_REFUSES = {
    "int_literals": "integer literals for a float input, which perf_analyzer 2.41 refuses ('unable to find float data "
                    "in json'): sent as their values; write 1.0 for both tools to take the file",
    "nested": "nested lists, which perf_analyzer 2.41 refuses ('unable to find float data in json', or int64_t "
              "and so on): flattened in row-major order; give a flat list and a 'shape' for both tools to take the file",
    "inferred_shape": "entries of different shapes with no 'shape' (nor load.input_shapes), which perf_analyzer 2.41 "
                      "refuses (one --shape for every entry): each entry's variable dimension is taken from its "
                      "element count; give each entry a 'shape' for both tools to take the file",
}


def document_lists(doc: Any, where: str) -> tuple[list[Any], list[Any] | None]:
    """The document's 'data' and 'validation_data' lists, or one line saying what is wrong with
    them: what can be checked without the model."""
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
    return data, validation


def parse_document(doc: Any, model: DataModel, where: str, notes: list[str] | None = None,
                   streams: list[int] | None = None) -> list[DataEntry]:
    """perf_analyzer's input-data JSON, already parsed, into entries; tensors named that the model
    lacks are left out, as perf_analyzer leaves them, and ``notes`` says so. What we accept and
    perf_analyzer 2.41 refuses (PA_REFUSES) is sent under the rule docs/input_data.md states, and
    ``notes`` says that too, once per kind, naming the first entry and input. Streams (entries
    that are lists of steps) are flattened, their lengths appended to ``streams``."""
    data, validation = document_lists(doc, where)
    ignored: dict[str, set[str]] = {"data": set(), "validation_data": set()}
    streamed = any(isinstance(entry, list) for entry in data)
    if streamed:
        entries = _streams(data, validation, model, where, ignored, streams)
    else:
        entries = []
        for k, step in enumerate(data):
            inputs = _tensors(step, model, k, where, False, ignored["data"])
            expected = (_tensors(validation[k], model, k, where, True, ignored["validation_data"])
                        if validation is not None else {})
            entries.append(DataEntry(inputs, expected))
    if notes is not None and not streamed:
        notes.extend(f"{where}: {first}: {PA_REFUSES[kind]}"
                     for kind, first in _differences(data, validation, model, entries).items())
    for what, names in ignored.items():
        if names and notes is not None:
            outputs = what == "validation_data"
            verb, kind, done = ("output", "outputs", "compared") if outputs else ("take", "inputs", "sent")
            notes.append(f"{where}: {what} names {', '.join(repr(n) for n in sorted(names))}, which the model does not "
                         f"{verb} ({kind}: {model.names(outputs)}): not {done}, as perf_analyzer ignores them")
    return entries


def _streams(data: list[Any], validation: list[Any] | None, model: DataModel, where: str,
             ignored: dict[str, set[str]], streams: list[int] | None) -> list[DataEntry]:
    """Sequence streams: every entry a non-empty list of steps, validation_data in the same shape."""
    if not model.sequence:
        first = next(i for i, e in enumerate(data) if isinstance(e, list))
        raise UserError(f"{where}: entry {first} is a list: sequence streams (lists of steps) are for sequence models, "
                        "and the model has no sequence_batching")
    entries = []
    for k, stream in enumerate(data):
        if not isinstance(stream, list):
            raise UserError(f"{where}: entry {k} is not a list of steps, though entry "
                            f"{next(i for i, e in enumerate(data) if isinstance(e, list))} is: give every entry as a stream")
        if not stream:
            raise UserError(f"{where}: entry {k} is an empty stream: a sequence needs at least one step")
        expected_steps = validation[k] if validation is not None else None
        if expected_steps is not None and (not isinstance(expected_steps, list) or len(expected_steps) != len(stream)):
            found = f"{len(expected_steps)} steps" if isinstance(expected_steps, list) else "not a list"
            raise UserError(f"{where}: validation_data entry {k} must align with its stream ({len(stream)} steps), "
                            f"found {found}")
        for j, step in enumerate(stream):
            label = f"{k}, step {j}"
            inputs = _tensors(step, model, label, where, False, ignored["data"])
            expected = (_tensors(expected_steps[j], model, label, where, True, ignored["validation_data"])
                        if expected_steps is not None else {})
            entries.append(DataEntry(inputs, expected))
        if streams is not None:
            streams.append(len(stream))
    return entries


def _tensors(step: Any, model: DataModel, k: int | str, where: str, outputs: bool,
             ignored: set[str]) -> dict[str, DataTensor]:
    """One entry's tensors (``k``: the entry, or "entry, step j" of a stream). A name the model
    lacks goes to ``ignored``: perf_analyzer looks up only the model's tensors, so one file serves
    an ensemble and the models it wraps; a control input of a sequence model is refused (Triton
    sets it from the sequence's parameters)."""
    what = "validation_data" if outputs else "data"
    if not isinstance(step, dict):
        raise UserError(f"{where}: {what} entry {k} is not an object of tensor names")
    controls = [name for name in step if name in model.controls]
    if controls and not outputs:
        name = controls[0]
        raise UserError(f"{where}: entry {k} gives {name!r}, the sequence batcher's {model.controls[name]} control "
                        "input: the tool sets it on every step from the sequence's id, start and end; leave it out")
    known = model.outputs if outputs else model.inputs
    ignored.update(name for name in step if name not in known and name not in IGNORED_KEYS)
    if not outputs:
        missing = [name for name in model.required if name not in step]
        if missing:
            raise UserError(f"{where}: entry {k} lacks input {missing[0]!r}")
    found = {}
    for name, value in step.items():
        if name not in known:
            continue
        label = f"{where}: {what} entry {k}, {'output' if outputs else 'input'} {name!r}"
        datatype, dims = known[name]
        found[name] = _tensor(value, datatype, dims, model.wanted.get(name) if not outputs else None, label, outputs)
    return found


def _tensor(value: Any, datatype: str, dims: list[int], wanted: list[int] | None, label: str,
            output: bool = False) -> DataTensor:
    """One tensor of an entry: a list, {"content": ..., "shape": ...} or {"b64": ...}."""
    shape = None
    content = value
    if isinstance(value, dict):
        if "shape" in value:
            shape = value["shape"]
            if isinstance(shape, Numbers):  # a long one: refused below unless its values are dimensions
                shape = _listed(shape, label)
            if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                      for d in shape):
                raise UserError(f"{label}: 'shape' must be a list of non-negative integers, found {short(shape)}")
        if "b64" in value:
            content = value
        elif "content" in value:
            content = value["content"]
        else:
            raise UserError(f"{label}: expected 'content' or 'b64' in {short(value)}")
    if isinstance(content, (list, Numbers)):
        raw, count = encode_values(content, datatype, label)
    elif isinstance(content, dict) and "b64" in content:
        raw, count = _decode_b64(content["b64"], datatype, label)
    else:
        raise UserError(f"{label}: expected a list of values or {{\"b64\": ...}}, found {short(content)}")
    if output and shape is None and sum(d < 0 for d in dims) > 1:
        return DataTensor(datatype, (count,), raw)  # expected values are compared as bytes: any shape that holds them
    return DataTensor(datatype, tuple(entry_shape(shape, dims, wanted, count, label)), raw)


def encode_values(values: list[Any] | Numbers, datatype: str, label: str) -> tuple[bytes, int]:
    """A JSON list of values (nested lists are flattened, row-major) as raw bytes, and its
    element count; a value the datatype cannot hold is the user's error."""
    if isinstance(values, Numbers):
        return _encode_numbers(values, datatype, label), len(values)
    flat = _flatten(values, label)
    if datatype == "BYTES":
        if not all(isinstance(v, str) for v in flat):
            bad = next(v for v in flat if not isinstance(v, str))
            raise UserError(f"{label}: BYTES values must be strings, found {short(bad)}")
        out = []
        for k, v in enumerate(flat):
            try:
                out.append(element(v.encode()))
            except UnicodeEncodeError:  # a lone surrogate ("\ud800"): valid JSON, not text
                raise UserError(f"{label}: BYTES value {k} is not valid Unicode text (a lone surrogate "
                                f"{v.encode('utf-8', 'backslashreplace').decode('ascii', 'replace')[:40]})") from None
        return b"".join(out), len(flat)
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


def _encode_numbers(numbers: Numbers, datatype: str, label: str) -> bytes:
    """A long list of numbers (engine/triton/input_decode.py) read straight into the datatype, a
    piece at a time, by the same rules as a short one."""
    if datatype == "BYTES":
        raise UserError(f"{label}: BYTES values must be strings, found {numbers.first()}")
    if datatype != "BOOL" and datatype not in FLOATS and datatype not in NUMPY_DTYPES:
        raise UserError(f"{label}: datatype {datatype!r} is not supported")
    out: list[bytes] = []
    try:
        for part in numbers.pieces():
            out.append(_encode_piece(part, datatype, label))
    except NotNumbers as exc:
        raise UserError(f"{label}: not a list of JSON numbers: found {exc.token.decode('ascii', 'replace')!r}") from None
    return b"".join(out)


def _listed(numbers: Numbers, label: str) -> list[Any]:
    """A long list of numbers as a Python list (a shape, or an inner list to flatten)."""
    try:
        return [value for part in numbers.pieces() for value in part.tolist()]
    except NotNumbers as exc:
        raise UserError(f"{label}: not a list of JSON numbers: found {exc.token.decode('ascii', 'replace')!r}") from None


def _encode_piece(part: np.ndarray, datatype: str, label: str) -> bytes:
    """One piece of a long list (float64, int64, or Python ints past int64) in ``datatype``."""
    if part.dtype == object and (datatype in FLOATS or datatype == "BOOL"):
        part = part.astype(np.float64)
    if datatype == "BOOL":
        bad = part[(part != 0) & (part != 1)] if part.size else part
        if part.dtype.kind == "f" or bad.size:
            raise UserError(f"{label}: BOOL values must be true/false (or 0/1), found "
                            f"{short(bad[0].item()) if bad.size else short(part[0].item())}")
        return part.astype(np.bool_).tobytes()
    if datatype in FLOATS:
        if datatype == "BF16":
            return bf16_bytes(part.astype(np.float32))
        return part.astype(np.dtype(NUMPY_DTYPES[datatype]).newbyteorder("<")).tobytes()
    dtype = NUMPY_DTYPES[datatype]
    if part.dtype.kind == "f":
        finite = np.isfinite(part)
        bad = part[~finite] if not finite.all() else part[part != np.floor(part)]
        raise UserError(f"{label}: {datatype} values must be integers, found "
                        f"{short(bad[0].item() if bad.size else part[0].item())}")
    limits = np.iinfo(dtype)  # type: ignore[type-var]  # an integer dtype here
    low, high = min(part.tolist()) if part.dtype == object else int(part.min()), (
        max(part.tolist()) if part.dtype == object else int(part.max()))
    if low < limits.min or high > limits.max:
        worst = low if low < limits.min else high
        raise UserError(f"{label}: value {worst} does not fit {datatype} ({limits.min} to {limits.max})")
    return np.array(part, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


def _differences(data: list[Any], validation: list[Any] | None, model: DataModel,
                 entries: list[DataEntry]) -> dict[str, str]:
    """The kinds of PA_REFUSES the document holds, each with the first entry and tensor that shows it."""
    found: dict[str, str] = {}
    inferred: dict[str, tuple[int, tuple[int, ...]]] = {}  # input -> the first entry's shape taken from its count
    for what, steps, known in (("data", data, model.inputs), ("validation_data", validation or [], model.outputs)):
        for k, step in enumerate(steps):
            for name, value in step.items() if isinstance(step, dict) else ():
                if name not in known:
                    continue
                datatype, dims = known[name]
                content = value.get("content") if isinstance(value, dict) else value
                first = f"{what} entry {k}, {name!r}"
                if isinstance(content, list) and any(isinstance(v, (list, Numbers)) for v in content):
                    found.setdefault("nested", first)
                if datatype in FLOATS and _int_literals(content):
                    found.setdefault("int_literals", first)
                if (what == "data" and sum(d < 0 for d in dims) == 1 and name not in model.wanted
                        and not (isinstance(value, dict) and "shape" in value)):
                    shape = entries[k].inputs[name].shape  # taken from its element count
                    if inferred.setdefault(name, (k, shape))[1] != shape:  # one --shape cannot serve both
                        found.setdefault("inferred_shape", f"{first} (entry {inferred[name][0]} has shape "
                                                           f"{list(inferred[name][1])}, this one {list(shape)})")
    return found


def _int_literals(content: Any) -> bool:
    if isinstance(content, Numbers):
        return content.int_literals
    if isinstance(content, list):
        return any(_int_literals(v) if isinstance(v, (list, Numbers)) else isinstance(v, int) and not isinstance(v, bool)
                   for v in content)
    return False


def bf16_bytes(floats: np.ndarray) -> bytes:
    """FP32 values as BF16 (the upper 16 bits), rounded to nearest even."""
    bits = floats.astype("<f4").view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def _decode_b64(text: Any, datatype: str, label: str) -> tuple[bytes, int]:
    if not isinstance(text, str):
        raise UserError(f"{label}: 'b64' must be a string, found {short(text)}")
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


def _flatten(values: list[Any], label: str) -> list[Any]:
    if not any(isinstance(v, (list, Numbers)) for v in values):
        return values
    out: list[Any] = []
    stack = [iter(values)]
    while stack:
        for v in stack[-1]:
            if isinstance(v, Numbers):  # a long inner list (rare: nested lists are perf_analyzer's refusal)
                out.extend(_listed(v, label))
            elif isinstance(v, list):
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
            return short(v)
    return "values of mixed kinds"
