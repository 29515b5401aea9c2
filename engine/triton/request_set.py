"""A sweep's requests, made once before its first level: one request of random or zero tensors
(load.data), or the input data's entries (engine/triton/input_data.py) made into requests.

Batching follows perf_analyzer (InferContext::UpdateJsonData): an entry is one batch element,
and request number k of a batch size B carries entries kB, kB+1, ..., kB+B-1, modulo the N
entries; its shape is [B] + the entries' shape, which must agree within the request. perf_analyzer
walks k over 0..N-1, which repeats after N / gcd(N, B) requests: those are the ones built here,
so that cycling through them sends what perf_analyzer sends, in its order. Expected outputs
(validation data) are joined the same way.
"""

from __future__ import annotations

import math

from engine.errors import UserError
from engine.triton.answer_values import Expected
from engine.triton.input_tensors import DataEntry, InputData
from engine.triton.request import request_inputs, request_shapes
from engine.triton.target import Target, TargetInfo
from engine.triton.transports import RequestInputs

MAX_PREPARED_BYTES = 2 << 30  # the sweep's requests together; more is refused before any is made


def random_requests(target: Target, info: TargetInfo, batch_size: int, data: str) -> tuple[list[RequestInputs], list[str]]:
    """load.data's one request (random or zeros), and its shape warnings."""
    shapes, tensors, warnings = request_inputs(target, info, batch_size, data)
    return [RequestInputs(shapes, tensors)], warnings


def request_count(entries: int, batch_size: int) -> int:
    """How many distinct requests ``entries`` entries make at ``batch_size`` (see above)."""
    return entries // math.gcd(entries, batch_size)


def prepared_bytes(entry_bytes: list[int], batch_size: int) -> int:
    """The input bytes of every request made from entries of these sizes: the requests cover
    lcm(N, B) consecutive entries, each entry lcm / N times. Pure: nothing is allocated."""
    n = len(entry_bytes)
    return math.lcm(n, batch_size) // n * sum(entry_bytes) if n else 0


def check_prepared_size(total: int, what: str) -> None:
    if total > MAX_PREPARED_BYTES:
        raise UserError(f"{what}: {total / (1 << 30):.1f} GiB, over the limit of {MAX_PREPARED_BYTES >> 30} GiB "
                        "(use fewer entries or a smaller batch size)")


def data_requests(target: Target, info: TargetInfo, batch_size: int, data: InputData) -> list[RequestInputs]:
    """The requests the input data makes at ``batch_size``."""
    request_shapes(target, info, batch_size)  # the batch size against the model's max_batch_size
    entries = data.entries
    n = len(entries)
    sizes = [sum(len(t.raw) for t in e.inputs.values()) for e in entries]
    check_prepared_size(prepared_bytes(sizes, batch_size),
                        f"input data {data.path}: {request_count(n, batch_size)} requests of batch {batch_size}")
    batched = info.max_batch_size > 0
    stream_steps = [(stream, step) for stream, steps in enumerate(data.streams) for step in range(steps)]
    requests = []
    for k in range(request_count(n, batch_size)):
        members = [(k * batch_size + j) % n for j in range(batch_size)]
        label = f"entry {members[0]}" if batch_size == 1 else "entries " + ", ".join(str(m) for m in members)
        if data.streams and batch_size == 1:  # a step of a sequence stream, named as the file has it
            label = f"entry {stream_steps[k][0]}, step {stream_steps[k][1]}"
        shapes: dict[str, list[int]] = {}
        tensors = []
        for tensor in info.inputs:
            joined = _join(tensor["name"], [entries[m] for m in members], members, "inputs", batched)
            if joined is not None:
                shapes[tensor["name"]], raw, _datatype = joined
                tensors.append((tensor, raw))
        expected = {}
        for out in info.outputs:
            joined = _join(out["name"], [entries[m] for m in members], members, "expected", batched)
            if joined is not None:
                expected[out["name"]] = Expected(joined[2], joined[1])
        requests.append(RequestInputs(shapes, tensors, expected, label))
    return requests


def _join(name: str, group: list[DataEntry], members: list[int], which: str,
          batched: bool) -> tuple[list[int], bytes, str] | None:
    """One tensor of a request: its entries' tensors joined (shape, bytes, datatype); None when
    no entry of the request has it."""
    found = [getattr(e, which).get(name) for e in group]
    present = [t for t in found if t is not None]
    if not present:
        return None
    kind = "input" if which == "inputs" else "validation data for output"
    if len(present) != len(found):
        missing = members[found.index(None)]
        raise UserError(f"input data: entry {missing} lacks {kind} {name!r}, which entry {members[0]} of the same "
                        "batch has")
    first = present[0]
    for member, t in zip(members, present, strict=True):
        if t.shape != first.shape:
            raise UserError(f"input data: cannot batch entries {members[0]} and {member}: {kind} {name!r} has shapes "
                            f"{list(first.shape)} and {list(t.shape)}")
    shape = [len(group), *first.shape] if batched else list(first.shape)
    return shape, b"".join(t.raw for t in present), first.datatype
