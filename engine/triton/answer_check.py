"""Every inference answer checked against what was asked: a KServe v2 response header that is a
JSON object, each output asked for present with the model's datatype, and the binary sizes adding
up to the body (or, for outputs placed in shared memory, the region asked for).

Cheap per answer: the answers to one request are nearly always the same bytes of JSON header,
so the header of the last answer that passed the full check is kept, and an answer whose body
has the same length and starts with the same header bytes passes on one memcmp. Any other is
parsed and checked in full. With validation data (the input data's ``validation_data``) an
answer's values are then compared with those expected for the request it answers
(``check_values``, engine/triton/answer_values.py); without it nothing more is done per answer.
Standard library only: load workers import it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from engine.triton.answer_values import Expected, binary_layout, compare_output

# bytes per element of the fixed-size KServe datatypes (BYTES has none: its size is in its data)
ITEM_SIZE = {"BOOL": 1, "UINT8": 1, "INT8": 1, "UINT16": 2, "INT16": 2, "FP16": 2, "BF16": 2,
             "UINT32": 4, "INT32": 4, "FP32": 4, "UINT64": 8, "INT64": 8, "FP64": 8}
HEADER_ALLOWANCE = 64 * 1024  # the JSON header of an answer, per output
MIN_RESPONSE_CAP = 1 << 20  # an answer may always be this large
UNKNOWN_OUTPUT_CAP = 256 << 20  # an output whose size the metadata does not fix (BYTES, variable dims)
MAX_LAYOUTS = 4096  # distinct answer headers whose binary layout is kept (one per request, nearly always)
MARGIN = 4  # the derived cap is this many times the answer's expected size


def fixed_size_bytes(datatype: str, shape: list[int] | tuple[int, ...]) -> int | None:
    """The bytes a tensor of fixed-size elements holds; None for BYTES (variable length)."""
    item = ITEM_SIZE.get(datatype)
    return None if item is None else math.prod(shape) * item


@dataclass(frozen=True)
class ShmOutput:
    """An output asked for in a shared-memory region: the answer must name the same place."""

    region: str
    offset: int
    byte_size: int


@dataclass
class AnswerSpec:
    """What every answer of a sweep must hold (picklable: it travels in the transport's payload)."""

    outputs: dict[str, str]  # output name -> the model's datatype ("" when the metadata gives none)
    shm: dict[str, ShmOutput] = field(default_factory=dict)  # outputs placed in shared memory
    max_bytes: int = MIN_RESPONSE_CAP  # an answer's body past this is refused (response_too_large)
    # validation data, per request of the sweep (its index in the transport's list): output name ->
    # what it must hold; empty when the input data has none (then no value is compared)
    expected: tuple[dict[str, Expected], ...] = ()
    labels: tuple[str, ...] = ()  # per request: the data entries it carries, for error lines
    tolerance: float = 1e-5  # load.validate_tolerance, for float outputs


def response_cap(outputs: list[dict[str, Any]], max_batch_size: int, batch_size: int) -> int:
    """The largest answer body we read: the outputs' declared shapes x datatype size x batch,
    plus their JSON header, times a generous margin; each output of unknown size (BYTES,
    variable dimensions) allows UNKNOWN_OUTPUT_CAP more."""
    known = unknown = 0
    for tensor in outputs:
        dims = [d if isinstance(d, int) else -1 for d in tensor.get("shape", [])]
        if max_batch_size > 0 and dims:
            dims = [batch_size, *dims[1:]]
        size = None if any(d < 0 for d in dims) else fixed_size_bytes(str(tensor.get("datatype", "")), dims)
        if size is None:
            unknown += UNKNOWN_OUTPUT_CAP
        else:
            known += size
        known += HEADER_ALLOWANCE
    return max(MIN_RESPONSE_CAP, MARGIN * known + unknown)


class AnswerCheck:
    """Checks the answers of one load worker's connections (one per worker: they share what
    was learnt of a good answer)."""

    def __init__(self, spec: AnswerSpec) -> None:
        self.spec = spec
        self.known = b"\0"  # the JSON header of the last answer that passed in full (never a prefix of JSON)
        self.known_body = -1  # its body's length
        self.known_ihl: int | None = -1  # its Inference-Header-Content-Length
        self.validate = bool(spec.expected)  # whether check_values has anything to compare
        self.layouts: dict[bytes, dict[str, tuple[int, int]] | None] = {}  # answer header -> binary_layout

    def check(self, buf: bytearray, start: int, body_len: int, ihl: int | None) -> str | None:
        """The answer whose body is ``buf[start:start + body_len]``, its inference header
        ``ihl`` bytes long (None: all of it, JSON only). A one-line problem, or None."""
        if body_len == self.known_body and ihl == self.known_ihl and buf.startswith(self.known, start):
            return None  # the same header bytes and lengths as an answer that passed in full
        header_len = body_len if ihl is None else ihl
        if header_len > body_len:
            return f"inference header of {header_len} bytes in a body of {body_len}"
        header = bytes(buf[start : start + header_len])
        problem = check_header(header, body_len - header_len, self.spec)
        if problem is None:
            self.known, self.known_body, self.known_ihl = header, body_len, ihl
        return problem

    def check_body(self, body: bytes, ihl: int | None) -> str | None:
        """The same for a body already taken out of the buffer (a chunked answer)."""
        return self.check(bytearray(body), 0, len(body), ihl)

    def check_values(self, buf: bytearray, start: int, body_len: int, ihl: int | None, request: int) -> str | None:
        """After ``check`` passed: the answer's outputs against the validation data of the
        sweep's request number ``request``; a one-line problem (entries, output, expected, got),
        or None. The binary layout of each distinct answer header is parsed once."""
        expected = self.spec.expected[request]
        if not expected:
            return None
        header_len = body_len if ihl is None else ihl
        header = bytes(buf[start : start + header_len])
        if header in self.layouts:
            layout = self.layouts[header]
        else:
            layout = binary_layout(header)
            if len(self.layouts) < MAX_LAYOUTS:
                self.layouts[header] = layout
        base = start + header_len
        view = memoryview(buf)
        for name, want in expected.items():
            place = layout.get(name) if layout else None
            if place is None:
                return f"{self.spec.labels[request]}: output {name!r} is not in the answer's binary data"
            problem = compare_output(name, want, view[base + place[0] : base + place[0] + place[1]], self.spec.tolerance)
            if problem is not None:
                return f"{self.spec.labels[request]}: {problem}"
        return None

    def check_raw(self, outputs: dict[str, bytes], request: int) -> str | None:
        """The same for outputs already split by the protocol (gRPC's raw_output_contents)."""
        for name, want in self.spec.expected[request].items():
            got = outputs.get(name)
            if got is None:
                return f"{self.spec.labels[request]}: output {name!r} is not in the answer"
            problem = compare_output(name, want, got, self.spec.tolerance)
            if problem is not None:
                return f"{self.spec.labels[request]}: {problem}"
        return None


def check_header(header_bytes: bytes, binary_len: int, spec: AnswerSpec) -> str | None:
    """The full check of one answer: its JSON header and the ``binary_len`` bytes after it."""
    try:
        header = json.loads(header_bytes)
    except (ValueError, RecursionError):
        return "inference header is not JSON"
    if not isinstance(header, dict):
        return f"inference header is a JSON {_kind(header)}, not an object"
    for key, want in (("model_name", str), ("model_version", str), ("id", str), ("parameters", dict)):
        if key in header and not isinstance(header[key], want):
            return f"{key!r} is a JSON {_kind(header[key])}"
    outputs = header.get("outputs")
    if not isinstance(outputs, list):
        return "'outputs' is missing" if outputs is None else f"'outputs' is a JSON {_kind(outputs)}, not a list"
    got: dict[str, dict[str, Any]] = {}
    binary = 0
    for output in outputs:
        if not isinstance(output, dict) or not isinstance(output.get("name"), str):
            return "an output that is not an object with a name"
        name = output["name"]
        problem = _check_output(name, output, spec)
        if isinstance(problem, str):
            return problem
        binary += problem
        got[name] = output
    missing = [name for name in spec.outputs if name not in got]
    if missing:
        return f"outputs {', '.join(missing)} missing"
    if binary != binary_len:
        return f"binary data of {binary_len} bytes where the outputs declare {binary}"
    return None


def _check_output(name: str, output: dict[str, Any], spec: AnswerSpec) -> str | int:
    """A problem with one output, or the binary bytes it declares."""
    datatype, shape, params = output.get("datatype"), output.get("shape"), output.get("parameters", {})
    if not isinstance(datatype, str):
        return f"output {name!r}: datatype is a JSON {_kind(datatype)}"
    want = spec.outputs.get(name)
    if want and datatype != want:
        return f"output {name!r}: datatype {datatype[:20]!r}, the model's is {want!r}"
    if (problem := shape_problem(name, shape)) is not None:
        return problem
    if not isinstance(params, dict):
        return f"output {name!r}: parameters is a JSON {_kind(params)}"
    placed = spec.shm.get(name)
    if placed is not None:
        if "binary_data_size" in params or "data" in output:
            return f"output {name!r}: asked for in shared memory, answered in the body"
        return _check_shm(name, params, placed)
    if "binary_data_size" in params:
        size = params["binary_data_size"]
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return f"output {name!r}: binary_data_size is {json.dumps(size)[:20]}, not a size"
        if (problem := size_problem(name, datatype, shape or [], size)) is not None:
            return problem
        return int(size)
    if not isinstance(output.get("data"), list):
        return f"output {name!r}: neither binary_data_size nor data"
    return 0


def shape_problem(name: str, shape: Any) -> str | None:
    """An output's shape, as any protocol answers it: a list of sizes (no negative dimension)."""
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        return f"output {name!r}: shape is not a list of sizes"
    return None


def size_problem(name: str, datatype: str, shape: list[int], size: int) -> str | None:
    """An output's bytes against its shape and datatype (BYTES and unknown datatypes: any size)."""
    expected = fixed_size_bytes(datatype, shape)
    if expected is not None and size != expected:
        return f"output {name!r}: {size} bytes for shape {shape} of {datatype}, which holds {expected}"
    return None


def _check_shm(name: str, params: dict[str, Any], placed: ShmOutput) -> str | int:
    """An output placed in shared memory: Triton names no place in its answer (the data is where
    the request put it); what an answer does name must be what was asked for."""
    region = params.get("shared_memory_region", placed.region)
    if region != placed.region:
        return f"output {name!r}: in shared memory region {json.dumps(region)[:40]}, asked for {placed.region!r}"
    size = params.get("shared_memory_byte_size", placed.byte_size)
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= placed.byte_size:
        return f"output {name!r}: shared_memory_byte_size {json.dumps(size)[:20]} in a region of {placed.byte_size}"
    offset = params.get("shared_memory_offset", placed.offset)
    if offset != placed.offset:
        return f"output {name!r}: shared_memory_offset {json.dumps(offset)[:20]}, asked for {placed.offset}"
    return 0


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "list", str: "string", int: "number", float: "number"}.get(type(value), type(value).__name__)
