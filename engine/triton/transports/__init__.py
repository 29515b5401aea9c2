"""The transports of the TRANSPORTS table (engine/transport_table.py): one module each, exposing
``TRANSPORT``, a ``Transport`` with two halves:

- in the session, once per sweep, ``prepare``: what every load worker sends (a picklable
  payload, e.g. the requests' bytes encoded once) and what to undo when the sweep ends;
- in each load worker, ``dialer(scheduler, payload)``: a ``Dialer`` (engine/net/connection.py).

A sweep has one request (random or zero tensors) or one per entry of the input data
(``SweepInputs.requests``), each encoded once. Load workers import these modules: keep their
top-level imports light (the session's side imports numpy where it needs it). This module is
standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from engine.net.connection import Dialer, Scheduler
    from engine.triton.answer_values import Expected
    from engine.triton.sequences import SequenceSetup
    from engine.triton.target import Target, TargetInfo


INTEGER_TYPES = {"INT8": "<i1", "INT16": "<i2", "INT32": "<i4", "INT64": "<i8",
                 "UINT8": "<u1", "UINT16": "<u2", "UINT32": "<u4", "UINT64": "<u8"}


# the most output tokens one response may report: more is the server's error, never counted (a
# stream's sum must stay within the 64-bit ticks that carry it)
MAX_RESPONSE_TOKENS = 1 << 24


def raw_token_count(raw: bytes, datatype: str) -> int | None:
    """The token count a response's load.tokens_from output carries (its elements summed: one
    element, the count), from the tensor's raw little-endian bytes; None when it is not a
    whole number of integers of ``datatype``. A sum below 0 or past MAX_RESPONSE_TOKENS is
    returned as it is: ``token_count_problem`` refuses it."""
    size = int(INTEGER_TYPES.get(datatype, "<i0")[2:])
    if not size or not raw or len(raw) % size:
        return None
    return sum(int.from_bytes(raw[i : i + size], "little", signed=datatype.startswith("INT"))
               for i in range(0, len(raw), size))


def json_token_count(value: object) -> int | None:
    """The same from a JSON value (the generate extension's events): an integer or a list of them."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        return None
    return sum(items)


def token_count_problem(found: int | None, output: str) -> str | None:
    """Why a response's token count (load.tokens_from) cannot be counted, naming the server's
    value, or None."""
    if found is None:
        return f"a response without a token count in {output} (load.tokens_from)"
    if not 0 <= found <= MAX_RESPONSE_TOKENS:
        shown = str(found) if abs(found) < 10**30 else f"{str(found)[:20]}... ({len(str(abs(found)))} digits)"
        return (f"the server answered a token count of {shown} in {output} (load.tokens_from), "
                f"outside 0..{MAX_RESPONSE_TOKENS} for one response")
    return None


@dataclass(frozen=True)
class RequestInputs:
    """One request of a sweep: each input's shape (batch included) and (tensor metadata, raw
    bytes), and what its answer must hold (validation data; empty without)."""

    shapes: dict[str, list[int]]
    tensors: list[tuple[dict, bytes]]
    expected: dict[str, Expected] = field(default_factory=dict)
    label: str = "entry 0"  # the input data entries it carries, for error lines


@dataclass
class SweepInputs:
    """What a transport prepares a sweep's requests from."""

    target: Target
    info: TargetInfo
    batch_size: int
    data: str  # load.data: "random" or "zeros"
    # request_inputs' answer for one request (random or zero tensors): shapes, (tensor metadata,
    # bytes), warnings; what ``requests`` holds when it is not given
    inputs: tuple[dict[str, list[int]], list[tuple[dict, bytes]], list[str]]
    gpus: tuple[int, ...] = ()  # where the model has instances
    # every request the sweep sends, in turn (input data: one per entry, engine/triton/request_set.py)
    requests: Sequence[RequestInputs] = ()
    tolerance: float = 1e-5  # load.validate_tolerance
    # load.tokens_from: (name, datatype) of the output that carries each response's token count;
    # None: a response is one token
    tokens_from: tuple[str, str] | None = None
    server_gpu: int | None = None  # the server's number for gpus[0] where not ours (engine/triton/shm.cuda_place)
    sequence: SequenceSetup | None = None  # a sequence model's sweep (engine/triton/sequences.py); None: not one

    def __post_init__(self) -> None:
        if not self.requests:
            self.requests = (RequestInputs(self.inputs[0], self.inputs[1]),)

    @property
    def validating(self) -> bool:
        return any(r.expected for r in self.requests)


@dataclass
class Prepared:
    """A sweep's requests, as every load worker receives them, and what to undo at its end."""

    payload: Any  # handed (pickled) to TRANSPORT.dialer in each worker
    request_bytes: int  # what one request puts on the wire (the workers rule weighs big requests)
    cleanup: Callable[[], Awaitable[None]] | None = None

    async def close(self) -> None:
        """Undo what prepare did; never raises (runs in finally)."""
        if self.cleanup is not None:
            await self.cleanup()


class Transport(Protocol):
    async def prepare(self, sweep: SweepInputs) -> Prepared:
        """Raises UserError (leaving nothing behind) when the requests cannot be made."""
        ...

    def dialer(self, scheduler: Scheduler, payload: Any) -> Dialer: ...


def transport_named(name: str) -> tuple[str, Transport]:
    """The module path (what a load worker imports) and the Transport of a TRANSPORTS entry."""
    from importlib import import_module

    from engine.errors import UserError
    from engine.transport_table import TRANSPORTS, TRITON

    spec = TRANSPORTS.get(name)
    if spec is None or spec.api != TRITON:
        own = ", ".join(t.name for t in TRANSPORTS.values() if t.api == TRITON)
        raise UserError(f"load.transport: expected one of {own} (Triton's; the OpenAI API's need load.api = "
                        f"'openai'), found {name!r}")
    return spec.module, import_module(spec.module).TRANSPORT


def check_streaming(name: str, model: str, model_config: dict) -> None:
    """A decoupled model on a transport that cannot carry its stream is bad input, refused before
    any load in one line naming the transports that can (every request would fail otherwise)."""
    from engine.errors import UserError
    from engine.transport_table import TRANSPORTS, TRITON, is_decoupled

    spec = TRANSPORTS.get(name)
    if spec is None or spec.streams or not is_decoupled(model_config):
        return
    streaming = ", ".join(t.name for t in TRANSPORTS.values() if t.streams and t.api == TRITON)
    raise UserError(f"model {model!r} is decoupled (it streams its responses): load.transport {name!r} "
                    f"cannot carry that; use one of: {streaming}")
