"""What the gRPC transports share (grpc, grpc_stream): the KServe v2 messages, the
requests built once per sweep, where the server's gRPC port is, the answer check, and a gRPC
status in the error kinds and words every gRPC transport reports.

No grpcio anywhere in the product (engine/ and tui/ never import grpc: an import contract in
pyproject.toml): the messages need only protobuf (``messages``), and the transports, on our own
HTTP/2 (engine/net/http2.py), read a call's status from its trailers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from engine.net.connection import REJECTED, RESPONSE_TOO_LARGE, SERVER_ERROR
from engine.triton.answer_check import AnswerSpec, response_cap, shape_problem, size_problem
from engine.triton.transports import Prepared, SweepInputs
from engine.triton.transports.sequence_steps import PROTO_PARAMETERS, SequencePlan

if TYPE_CHECKING:
    from engine.triton.target import Target

TOO_LARGE = "larger than max"  # grpcio's words for an answer past max_receive_message_length
# the server refused the request (its input, the model, our credentials); other codes it failed
REFUSALS = {"INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION", "OUT_OF_RANGE", "ALREADY_EXISTS",
            "PERMISSION_DENIED", "UNAUTHENTICATED", "UNIMPLEMENTED"}
# gRPC's status codes, by number (what a trailer's grpc-status holds)
STATUS_NAMES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
                "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")
# codes that say the connection broke rather than the server answering (grpcio reports a lost
# connection with them): counted as a lost connection, not an answer
BROKEN = {"UNAVAILABLE", "CANCELLED"}
GRPC_PREFIX = 5  # a framed message's compressed flag and length, before the message


@dataclass
class GrpcPayload:
    """What each load worker gets: where to connect, and the requests its connections send."""

    address: str  # host:port
    tls: bool
    requests: tuple[bytes, ...]  # each serialised ModelInferRequest, sent in turn
    metadata: tuple[tuple[str, str], ...]  # the target's headers, as gRPC metadata
    outputs: tuple[tuple[str, str], ...]  # (name, datatype) of each output asked for
    max_answer: int  # bytes: a larger answer is refused (response_too_large)
    values: AnswerSpec | None = None  # validation data, per request (None: values not compared)
    tokens_from: tuple[str, str] | None = None  # a streaming model's token-count output (load.tokens_from)
    sequence: SequencePlan | None = None  # a sequence model's (slots in the framed messages); None: not one


def grpc_address(target: Target) -> tuple[str, bool]:
    """host:port of the server's gRPC endpoint, and whether it takes TLS (an https URL)."""
    from urllib.parse import urlsplit

    from engine.errors import UserError

    explicit = target.grpc_url
    try:
        parts = urlsplit(target.http_url)
        tls = parts.scheme == "https"
        if explicit:
            return (explicit.split("://", 1)[-1].rstrip("/"), tls)
        host, port = parts.hostname, parts.port or (443 if tls else 80)
    except ValueError as exc:
        raise UserError(f"server URL: {exc}") from None
    if not host:
        raise UserError(f"server URL: expected http://host:port, found {target.http_url!r}")
    return (f"[{host}]" if ":" in host else host) + f":{port + 1}", tls


def error_kind(code: str, details: str) -> str:
    """The error kind of a call that ended with gRPC status ``code`` (not OK, not a broken
    connection): our cap on answers, the server's refusal, or its failure."""
    if code == "RESOURCE_EXHAUSTED" and TOO_LARGE in details:
        return RESPONSE_TOO_LARGE
    return REJECTED if code in REFUSALS else SERVER_ERROR


def status_of(headers: dict[str, str]) -> tuple[str, str]:
    """The gRPC status of a call the server ended (its trailers): the code's name and the
    details in one line (grpc-message is percent-encoded)."""
    code = headers.get("grpc-status", "")
    name = STATUS_NAMES[int(code)] if code.isdigit() and int(code) < len(STATUS_NAMES) else f"status {code or 'none'}"
    return name, " ".join(unquote(headers.get("grpc-message", "")).split())[:200]


def status_line(headers: dict[str, str]) -> str:
    """The gRPC status of a call the server ended, in one line ("gRPC UNAVAILABLE: ...")."""
    name, details = status_of(headers)
    return f"gRPC {name}: {details}" if details else f"gRPC {name}"


def check_answer(reply: Any, outputs: tuple[tuple[str, str], ...]) -> str | None:
    """One line on what is wrong with a ModelInferResponse, or None: each output asked for is
    there with its datatype, and each raw output holds what its shape and datatype say."""
    got = {o.name: o for o in reply.outputs}
    for name, datatype in outputs:
        out = got.get(name)
        if out is None:
            return f"answer lacks output {name}"
        if datatype and out.datatype != datatype:
            return f"output {name} is {out.datatype}, expected {datatype}"
    raw = reply.raw_output_contents
    if len(raw) != len(reply.outputs):
        return f"answer has {len(raw)} raw outputs for {len(reply.outputs)} outputs"
    for out, blob in zip(reply.outputs, raw, strict=True):  # the HTTP answers' checks, the same words
        shape = list(out.shape)
        problem = shape_problem(out.name, shape) or size_problem(out.name, out.datatype, shape, len(blob))
        if problem is not None:
            return problem
    return None


RAW_OUTPUT_FIELD = 6  # ModelInferResponse.raw_output_contents (service.proto)
MAX_LAYOUTS = 64  # reply layouts kept per worker, one per message size


def _varint(data: bytes | bytearray, at: int, end: int) -> tuple[int, int]:
    """A protobuf varint at ``at``: its value and where it ends; ValueError past ``end``."""
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            raise ValueError("a broken varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


class ReplyLayout:
    """The bytes of a framed ModelInferResponse that passed ``check_answer``, but for its raw
    outputs' contents: the fields before them (``prefix``: outputs, names, datatypes, shapes)
    and each raw output's tag and length, at its place. A message of the same size whose bytes
    agree everywhere but in those contents has the same outputs and raw sizes, so the same
    verdict: its check is a few byte compares, not a parse."""

    __slots__ = ("heads", "names", "prefix", "spans", "start")

    def __init__(self, start: int, prefix: bytes, heads: tuple[tuple[int, bytes], ...],
                 spans: tuple[tuple[int, int], ...], names: tuple[str, ...]) -> None:
        self.start = start  # where the message starts in the framed bytes
        self.prefix = prefix
        self.heads = heads  # (offset, tag and length bytes) of each raw output
        self.spans = spans  # (start, end) of each raw output's contents
        self.names = names  # the output each raw output is, in order

    def matches(self, framed: bytes | bytearray) -> bool:
        """Whether ``framed`` (as long as the message this was learnt from) has its layout."""
        if not framed.startswith(self.prefix, self.start):
            return False
        for at, head in self.heads:
            if not framed.startswith(head, at):
                return False
        return True

    def outputs(self, framed: bytes | bytearray) -> dict[str, bytes]:
        """Each output's raw contents in ``framed`` (one that ``matches``), by name."""
        return {name: bytes(framed[a:b]) for name, (a, b) in zip(self.names, self.spans, strict=True)}


def reply_layout(framed: bytes | bytearray, start: int, names: tuple[str, ...]) -> ReplyLayout | None:
    """The layout of the message in ``framed[start:]`` whose outputs are ``names`` (a reply that
    parsed and passed its check); None where its raw outputs are not the message's last fields,
    one per name (the check would then need the parse)."""
    at, end = start, len(framed)
    raw_from = -1
    heads: list[tuple[int, bytes]] = []
    spans: list[tuple[int, int]] = []
    try:
        while at < end:
            field_at = at
            tag, at = _varint(framed, at, end)
            wire = tag & 7
            if wire == 2:
                length, at = _varint(framed, at, end)
                if tag >> 3 == RAW_OUTPUT_FIELD:
                    if raw_from < 0:
                        raw_from = field_at
                    heads.append((field_at, bytes(framed[field_at:at])))
                    spans.append((at, at + length))
                    at += length
                    continue
                at += length
            elif wire == 0:
                _, at = _varint(framed, at, end)
            elif wire == 1:
                at += 8
            elif wire == 5:
                at += 4
            else:
                return None
            if raw_from >= 0:  # a field after the raw outputs
                return None
    except ValueError:
        return None
    if at != end or len(heads) != len(names):
        return None
    prefix_end = raw_from if raw_from >= 0 else end
    return ReplyLayout(start, bytes(framed[start:prefix_end]), tuple(heads), tuple(spans), names)


class ReplyLayouts:
    """A worker's learnt layouts (ReplyLayout), by the framed message's size."""

    def __init__(self) -> None:
        self.by_size: dict[int, ReplyLayout] = {}

    def known(self, framed: bytes | bytearray) -> ReplyLayout | None:
        """The layout ``framed`` has, if learnt: its answer passes ``check_answer``."""
        layout = self.by_size.get(len(framed))
        return layout if layout is not None and layout.matches(framed) else None

    def learn(self, framed: bytes | bytearray, start: int, reply: Any) -> None:
        """``reply``, parsed from ``framed[start:]``, passed ``check_answer``: keep its layout."""
        if len(self.by_size) >= MAX_LAYOUTS and len(framed) not in self.by_size:
            return
        layout = reply_layout(framed, start, tuple(o.name for o in reply.outputs))
        if layout is not None:
            self.by_size[len(framed)] = layout


def messages() -> Any:
    """tritonclient's generated KServe v2 messages (tritonclient.grpc.service_pb2). In a load worker
    they load without tritonclient.grpc's __init__, which imports its whole client and numpy (about
    a third of a second per worker) for messages that need only protobuf."""
    import importlib
    import importlib.util
    import os
    import sys
    import types

    if "tritonclient.grpc" not in sys.modules:
        spec = importlib.util.find_spec("tritonclient")
        if spec is not None and spec.submodule_search_locations:
            bare = types.ModuleType("tritonclient.grpc")
            bare.__path__ = [os.path.join(next(iter(spec.submodule_search_locations)), "grpc")]
            sys.modules["tritonclient.grpc"] = bare
    return importlib.import_module("tritonclient.grpc.service_pb2")


# HTTP/2's client preface and an empty SETTINGS frame: a gRPC server answers with its SETTINGS
# frame, an HTTP/1 server with a status line (grpcio only says "unavailable", for 20 s)
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
PROBE_S = 5.0


async def not_grpc(address: str) -> str | None:
    """Whether the port at ``address`` (host:port, no TLS) is something other than an HTTP/2
    server: one line saying so, else None (gRPC, nothing listening, or no answer within PROBE_S:
    the sweep finds out). A gRPC server answers HTTP/2's preface with its SETTINGS frame."""
    host, _, port = address.rpartition(":")
    try:
        async with asyncio.timeout(PROBE_S):
            reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
            try:
                writer.write(H2_PREFACE)
                await writer.drain()
                first = await reader.read(64)
            finally:
                writer.close()
    except (OSError, TimeoutError, ValueError):
        return None
    if len(first) >= 9 and first[3] == 0x04:  # HTTP/2's SETTINGS frame: a gRPC server, as far as the wire says
        return None
    status_line = first.split(b"\r")[0].decode("ascii", "replace")
    if not first:  # Triton's HTTP front end closes the connection at HTTP/2's preface
        said = "HTTP/2's preface by closing the connection (an HTTP/1 server, such as Triton's HTTP port)"
    elif first.startswith(b"HTTP/"):
        said = f"HTTP/1 ({status_line})"
    else:
        said = "but not HTTP/2 (an HTTP/1 server's error page, or another protocol)"
    return f"gRPC: {address} is not a gRPC server: it answers {said} (Triton's gRPC port is its HTTP port + 1)"


class GrpcRequests:
    """The ``prepare`` half of the gRPC transports: each request of the sweep as one serialised
    ``ModelInferRequest`` (tritonclient's generated messages), the inputs in
    ``raw_input_contents``, built once in the session."""

    async def prepare(self, sweep: SweepInputs) -> Prepared:
        service_pb2 = messages()  # the session's side

        address, tls = grpc_address(sweep.target)
        if not tls and (problem := await not_grpc(address)) is not None:
            from engine.errors import UserError

            raise UserError(problem)
        raws = []
        for r in sweep.requests:
            request = service_pb2.ModelInferRequest(model_name=sweep.target.model,
                                                    model_version=sweep.target.model_version)
            for tensor, blob in r.tensors:
                entry = request.inputs.add()
                entry.name, entry.datatype = tensor["name"], tensor["datatype"]
                entry.shape.extend(r.shapes[tensor["name"]])
                request.raw_input_contents.append(blob)
            for out in sweep.info.outputs:
                request.outputs.add().name = out["name"]
            # a sequence model's parameters lead the message (fields may come in any order)
            raws.append((PROTO_PARAMETERS if sweep.sequence is not None else b"") + request.SerializeToString())
        metadata = tuple((k.lower(), v) for k, v in sweep.target.headers.items())
        outputs = tuple((o["name"], o.get("datatype", "")) for o in sweep.info.outputs)
        cap = response_cap(sweep.info.outputs, sweep.info.max_batch_size, sweep.batch_size)
        values = AnswerSpec({}, expected=tuple(r.expected for r in sweep.requests),
                            labels=tuple(r.label for r in sweep.requests),
                            tolerance=sweep.tolerance) if sweep.validating else None
        # slots in the framed message the workers send: after its 5-byte gRPC prefix
        plan = sweep.sequence.plan(tuple(raws), proto_at=GRPC_PREFIX) if sweep.sequence is not None else None
        payload = GrpcPayload(address, tls, tuple(raws), metadata, outputs, cap, values, sweep.tokens_from, plan)
        return Prepared(payload, sum(len(r) for r in raws) // len(raws))
