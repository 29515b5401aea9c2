"""A sweep's request: its input tensors (``request_inputs``, for every transport) and, for the
HTTP transports (engine/triton/transports/), one KServe v2 request with Triton's binary tensor
extension, encoded once per sweep.

The bytes (request line, headers, JSON inference header, raw tensor bytes) are built here in
the session and written as they are by every load worker for every request, so the hot path
never encodes anything. Outputs are requested as binary too: JSON-encoding outputs would
measure the server's number formatting rather than the model.

Every input the model's metadata lists is sent, optional inputs included (the metadata does not
mark them; perf_analyzer sends them all too), so both tools measure the same work. The shapes come
from the top model's metadata, whatever serves it: an ensemble or a BLS model is one model here.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from engine.errors import UserError
from engine.net.http1 import Endpoint, encode_request
from engine.triton.answer_check import ITEM_SIZE, fixed_size_bytes
from engine.triton.input_tensors import element
from engine.triton.shm import ShmPlan
from engine.triton.target import Target, TargetInfo

# KServe v2 datatype -> numpy dtype (BF16 has none: built from FP32 bits; BYTES is special)
NUMPY_DTYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}
BYTES_ELEMENT = 8  # random BYTES elements are this many ASCII digits
MAX_REQUEST_BYTES = 1 << 30  # one request's input tensors; a larger one is refused before it is built


@dataclass
class PreparedRequest:
    raw: bytes  # the whole HTTP request, ready to write
    path: str
    shapes: dict[str, list[int]]  # the shape sent for each input, batch included
    body_bytes: int
    warnings: list[str]


def request_shapes(target: Target, info: TargetInfo, batch_size: int) -> tuple[dict[str, list[int]], list[str]]:
    """Shape of each input for one request of ``batch_size``; variable dims need an override."""
    if batch_size < 1:
        raise UserError(f"batch size must be at least 1, found {batch_size}")
    if info.max_batch_size > 0 and batch_size > info.max_batch_size:
        raise UserError(
            f"batch size {batch_size} exceeds model {target.model!r}'s max_batch_size ({info.max_batch_size})"
        )
    if info.max_batch_size == 0 and batch_size != 1:
        raise UserError(f"model {target.model!r} does not batch (max_batch_size 0): use batch_size 1")
    known = {t["name"] for t in info.inputs}
    unknown = sorted(set(target.input_shapes) - known)
    if unknown:
        raise UserError(f"input_shapes names {', '.join(unknown)}: model {target.model!r} has inputs {', '.join(sorted(known))}")
    shapes: dict[str, list[int]] = {}
    warnings: list[str] = []
    for tensor in info.inputs:
        dims = list(tensor["shape"])
        if info.max_batch_size > 0:
            dims = dims[1:]  # the metadata's leading -1 is the batch dimension
        override = target.input_shapes.get(tensor["name"])
        if override is not None:
            if any(not isinstance(d, int) or d < 0 for d in override):
                raise UserError(f"input_shapes[{tensor['name']!r}] must be non-negative integers, found {override}")
            dims = list(override)
        elif any(d < 0 for d in dims):
            fixed = [1 if d < 0 else d for d in dims]
            warnings.append(
                f"input {tensor['name']!r} has variable dimensions {tensor['shape']}: sending {fixed}"
                " (set the target's input_shapes to choose)"
            )
            dims = fixed
        shapes[tensor["name"]] = ([batch_size] + dims) if info.max_batch_size > 0 else dims
    check_request_size(shapes, info, target.model)
    return shapes, warnings


def check_request_size(shapes: dict[str, list[int]], info: TargetInfo, model: str) -> None:
    """One request's random or zero inputs within MAX_REQUEST_BYTES, computed from the shapes
    alone (nothing allocated): load.input_shapes may ask for any size."""
    total = 0
    for tensor in info.inputs:
        count = math.prod(shapes.get(tensor["name"], []))
        size = 4 + BYTES_ELEMENT if tensor["datatype"] == "BYTES" else ITEM_SIZE.get(tensor["datatype"], 8)
        total += count * size
    if total > MAX_REQUEST_BYTES:
        sizes = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise UserError(f"model {model!r}: one request's inputs would take {total / (1 << 30):.3g} GiB ({sizes}), "
                        f"over the limit of {MAX_REQUEST_BYTES >> 30} GiB: choose smaller load.input_shapes or batch size")


def tensor_bytes(datatype: str, shape: list[int], data: str, rng: np.random.Generator) -> bytes:
    """Raw little-endian tensor contents: random values in a small range, or zeros."""
    count = math.prod(shape)
    zeros = data == "zeros"
    if datatype == "BYTES":
        # binary BYTES: each element is a 4-byte little-endian length then its bytes
        if zeros:
            return element(b"0") * count
        # built whole in numpy (a Python loop per element would hold the session for minutes)
        rows = np.empty((count, 4 + BYTES_ELEMENT), np.uint8)
        rows[:, :4] = np.frombuffer(BYTES_ELEMENT.to_bytes(4, "little"), np.uint8)
        rows[:, 4:] = rng.integers(48, 58, (count, BYTES_ELEMENT), dtype=np.uint8)
        return rows.tobytes()
    if datatype == "BF16":
        floats = np.zeros(count, np.float32) if zeros else rng.random(count, dtype=np.float32)
        return (floats.view(np.uint32) >> 16).astype("<u2").tobytes()
    dtype = NUMPY_DTYPES.get(datatype)
    if dtype is None:
        raise UserError(f"input datatype {datatype!r} is not supported by the load generator")
    if zeros:
        return np.zeros(count, dtype).astype(np.dtype(dtype).newbyteorder("<")).tobytes()
    if dtype is np.bool_:
        values = rng.integers(0, 2, count).astype(np.bool_)
    elif np.issubdtype(dtype, np.integer):
        values = rng.integers(0, 10, count).astype(dtype)  # small: valid as ids or indices
    else:
        values = rng.random(count).astype(dtype)
    return values.astype(np.dtype(dtype).newbyteorder("<")).tobytes()


def request_inputs(
    target: Target, info: TargetInfo, batch_size: int, data: str = "random", seed: int = 0
) -> tuple[dict[str, list[int]], list[tuple[dict, bytes]], list[str]]:
    """Each input's shape, (metadata, raw bytes) and any warnings, for one request."""
    shapes, warnings = request_shapes(target, info, batch_size)
    rng = np.random.default_rng(seed)
    tensors = [(t, tensor_bytes(t["datatype"], shapes[t["name"]], data, rng)) for t in info.inputs]
    return shapes, tensors, warnings


def output_sizes(info: TargetInfo, batch_size: int) -> list[tuple[str, int]]:
    """(name, bytes) of each output whose size is known before the response (fixed dims, not
    BYTES): those a shared-memory transport can place in a region."""
    sizes = []
    for tensor in info.outputs:
        dims = list(tensor.get("shape", []))
        if info.max_batch_size > 0 and dims:
            dims = [batch_size] + dims[1:]
        size = None if any(d < 0 for d in dims) else fixed_size_bytes(tensor.get("datatype", ""), dims)
        if size is not None:  # BF16 included: its size is known though numpy has no such type
            sizes.append((tensor["name"], size))
    return sizes


def prepare_request(
    target: Target, info: TargetInfo, endpoint: Endpoint, batch_size: int, data: str = "random", seed: int = 0,
    shm: ShmPlan | None = None,
    inputs: tuple[dict[str, list[int]], list[tuple[dict, bytes]], list[str]] | None = None,
    request: int = 0,
    sequence: bool = False,
) -> PreparedRequest:
    """The whole HTTP request. With ``shm`` (a shared-memory transport) the inputs, and the
    outputs it places, are named by region instead of carried in the body: a JSON-only body.
    ``inputs``: request_inputs' answer when the caller already has it (made once per sweep);
    ``request``: which of the sweep's requests it is (where ``shm`` placed its inputs);
    ``sequence``: a sequence model's, its header led by the sequence parameters' slots
    (engine/triton/sequences.py)."""
    shapes, tensors, warnings = inputs or request_inputs(target, info, batch_size, data, seed)
    header_inputs = []
    blobs = []
    for tensor, blob in tensors:
        entry = {"name": tensor["name"], "shape": shapes[tensor["name"]], "datatype": tensor["datatype"]}
        if shm is not None:
            entry["parameters"] = shm.request_inputs(request)[tensor["name"]].parameters()
        else:
            entry["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        header_inputs.append(entry)
    outputs = []
    for t in info.outputs:
        placed = shm.outputs.get(t["name"]) if shm is not None else None
        outputs.append({"name": t["name"], "parameters": placed.parameters() if placed else {"binary_data": True}})
    header_bytes = json.dumps({"inputs": header_inputs, "outputs": outputs}, separators=(",", ":")).encode()
    if sequence:
        from engine.triton.sequences import PARAMETERS

        header_bytes = PARAMETERS + header_bytes[1:]
    body = header_bytes + b"".join(blobs)
    path = f"{target.model_path}/infer"
    headers = {**target.headers}
    if blobs:
        headers["Content-Type"] = "application/octet-stream"
        headers["Inference-Header-Content-Length"] = str(len(header_bytes))
    else:
        headers["Content-Type"] = "application/json"
    raw = encode_request("POST", endpoint, path, headers, body)
    return PreparedRequest(raw=raw, path=path, shapes=shapes, body_bytes=len(body), warnings=warnings)
