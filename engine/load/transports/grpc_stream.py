"""load.transport = grpc_stream: Triton's ``ModelStreamInfer``, one bidirectional gRPC stream per connection, for decoupled models that answer a request with a stream of responses.

As perf_analyzer's ``-i grpc --streaming``. The requests are the grpc transport's serialised
``ModelInferRequest``s (built once in the session, with Triton's
``triton_enable_empty_final_response`` set so that every request ends with a response flagged
``triton_final_response``); each send prefixes the request's id, a protobuf field that the
parser merges, so the responses of a request the scheduler has given up on (a timeout) are told
from the current one's. A connection carries one request at a time: its reader takes the
stream's responses, checks each one (the grpc transport's answer check; an empty final response
carries no outputs), times the first (TTFT) and the gaps between them (ITL), and reports the
request answered at its final response; with validation data, the last response that carries
outputs is compared with it (a stream's answer is its last response, as perf_analyzer's
``validation_data`` reads it). An error response refuses it (``rejected``); a stream
that ends or breaks with a request in flight is a lost connection (``connection_reset``), never
a shorter answer.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc

from engine.load.answer_check import AnswerCheck
from engine.load.eager_start import start_eagerly
from engine.load.transport import (
    MALFORMED_ANSWER,
    REJECTED,
    WRONG_ANSWER,
    Connection,
    Dialer,
    Prepared,
    RequestCycle,
    Scheduler,
    StreamTimes,
    SweepInputs,
    raw_token_count,
)
from engine.load.transports.grpc import (
    GrpcPayload,
    GrpcTransport,
    channel_ready,
    check_answer,
    messages,
    open_channel,
)

monotonic_ns = time.monotonic_ns
METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"
FINAL = "triton_final_response"  # Triton's parameter on each response of a decoupled model's stream
ENABLE_EMPTY_FINAL = "triton_enable_empty_final_response"


def arrival(selector: Any, since_ns: int) -> int:
    """When the response a stream's reader takes now reached this process. grpc.aio hands it over
    in two loop passes: its completion queue's socket wakes the loop's select (pass N, whose
    callback resolves the read), then the reader resumes (pass N+1) behind every other reader
    resumed then. The time select returned in pass N (the worker's selector keeps it as
    ``previous``) is the arrival, as perf_analyzer's reader thread stamps each response when it
    wakes; reading the clock here would add the other streams' Python work of the same pass (a
    burst of 32 responses at 32 streams). Never before ``since_ns`` (the write) nor after now."""
    now = monotonic_ns()
    seen = getattr(selector, "previous", 0) or now
    return min(now, max(seen, since_ns))


class GrpcStreamConnection(Connection):
    """One gRPC channel (one TCP connection) with one open ModelStreamInfer stream."""

    def __init__(self, scheduler: Scheduler, dialer: GrpcStreamDialer) -> None:
        super().__init__(scheduler)
        self.dialer = dialer
        self.payload = dialer.payload
        self.channel: Any = None
        self.call: Any = None  # the stream (grpc.aio.StreamStreamCall)
        self.reader: asyncio.Task[None] | None = None
        self.current = ""  # id of the request in flight ("" none)
        self.sent_index = 0  # which of the sweep's requests it is (validation data)
        self.serial = 0
        self.times = StreamTimes()  # the request in flight's (``stream`` to the scheduler)
        self.stream = self.times
        self.writing: asyncio.Task[None] | None = None  # the last write, which the next one waits for
        self.last: Any = None  # the request in flight's last response with outputs

    def new_stream(self) -> Any:
        self.close_channel()
        p = self.payload
        self.channel = open_channel(p.address, p.tls, p.max_answer)
        return self.channel

    def start_stream(self) -> None:
        method = self.channel.stream_stream(METHOD, request_serializer=None,
                                            response_deserializer=self.dialer.parse)
        self.call = method(metadata=self.payload.metadata)
        self.reader = self.w.loop.create_task(self._read(self.call))

    def close_channel(self) -> None:
        channel, self.channel = self.channel, None
        call, self.call = self.call, None
        reader, self.reader = self.reader, None
        self.current = ""
        self.writing = None
        if call is not None:
            call.cancel()
        if reader is not None and not reader.done() and reader is not asyncio.current_task():
            reader.cancel()
        if channel is not None:
            self.dialer.closing(channel)

    # -- Connection

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = self.written_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        self.serial += 1
        self.current = f"{self.w.index}.{self.serial}"
        self.sent_index = self.dialer.cycle.take()
        self.times = self.stream = StreamTimes()
        # the id first: a repeated scalar field merges, so the request's own bytes stay as built
        data = self.dialer.id_prefix(self.current) + self.payload.requests[self.sent_index]
        # one write at a time on a stream: the answer to the last request can come before its
        # write's coroutine has returned. Started now, not a loop pass later (eager_start).
        self.writing = self.dialer.start(self._write(self.call, data, self.writing))
        return now

    async def _write(self, call: Any, data: bytes, previous: asyncio.Task[None] | None) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait((previous,))
        if call is not self.call:
            return  # the stream closed meanwhile
        # the request starts when gRPC is handed it, as perf_analyzer's clock starts before its
        # write: not when send() was called, a loop pass (the other streams' responses) earlier
        now = monotonic_ns()
        if self.intended_ns == self.sent_ns:  # concurrency mode (rate mode: its schedule's time)
            self.intended_ns = now
        self.sent_ns = self.written_ns = now
        try:
            await call.write(data)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the stream broke under the write: the request in flight is lost
            # a later pass: this may run inside send(), which the scheduler expects to return first
            self.w.loop.call_soon(self._gone_if_current, call, exc)

    def _gone_if_current(self, call: Any, exc: BaseException) -> None:
        if call is self.call:
            self._gone(exc)

    async def _read(self, call: Any) -> None:
        try:
            while True:
                reply = await call.read()
                if reply is grpc.aio.EOF:
                    break
                if call is not self.call:
                    return
                self.take(reply)
        except asyncio.CancelledError:
            return
        except grpc.aio.AioRpcError as exc:
            if call is not self.call:
                return
            details = " ".join((exc.details() or "").split())[:200]
            self._gone(ConnectionResetError(f"gRPC {exc.code().name}: {details}"))
            return
        except Exception as exc:  # a write on a stream that broke meanwhile
            if call is not self.call:
                return
            self._gone(exc)
            return
        if call is self.call:
            self._gone(None)  # the server ended the stream

    def take(self, reply: Any) -> None:
        """One message of the stream: a response of the request in flight, or an error."""
        response = reply.infer_response
        if not self.busy or response.id != self.current:
            return  # a request since given up on (timed out)
        now = arrival(self.w.selector, self.sent_ns)
        if reply.error_message:
            self.current = ""
            self.first_ns = now
            text = " ".join(reply.error_message.split())[:200]
            self.w.rejected(self, REJECTED, f"gRPC stream error: {text}", False)
            return
        final = FINAL in response.parameters and response.parameters[FINAL].bool_param
        if response.outputs or not final:
            problem = check_answer(response, self.payload.outputs)
            if problem is not None:
                self._refuse(MALFORMED_ANSWER, problem, now)
                return
            tokens = 1
            counted = self.payload.tokens_from
            if counted is not None:
                raw = dict(zip((o.name for o in response.outputs), response.raw_output_contents, strict=False))
                found = raw_token_count(raw.get(counted[0], b""), counted[1])
                if found is None:
                    self._refuse(MALFORMED_ANSWER, f"a response without a token count in {counted[0]} "
                                 "(load.tokens_from)", now)
                    return
                tokens = found
            self.times.add(now, tokens)
            self.last = response
        if final:
            self.current = ""
            self.first_ns = now  # the answer's time: the scheduler's split of the latency ends here
            if self.times.responses == 0:
                self._refuse(MALFORMED_ANSWER, "the stream ended the request with no response", now)
                return
            if self.dialer.values is not None:  # validation data: the last response's values, as perf_analyzer's
                last = self.last
                problem = self.dialer.values.check_raw(
                    dict(zip((o.name for o in last.outputs), last.raw_output_contents, strict=True)), self.sent_index)
                if problem is not None:
                    self._refuse(WRONG_ANSWER, problem, now)
                    return
            self.w.answered(self, False)

    def _refuse(self, kind: str, problem: str, now: int) -> None:
        self.current = ""
        self.first_ns = now
        self.w.rejected(self, kind, problem, False)

    def _gone(self, exc: BaseException | None) -> None:
        self.close_channel()
        self.connected = False
        self.w.lost(self, exc)

    def abort(self) -> None:
        was_open = self.connected
        self.connected = False
        self.close_channel()
        if was_open:
            self.w.loop.call_soon(self.w.lost, self, None)


class GrpcStreamDialer(Dialer):
    def __init__(self, scheduler: Scheduler, payload: GrpcPayload) -> None:
        self.w = scheduler
        self.payload = payload
        service_pb2 = messages()
        self.parse = service_pb2.ModelStreamInferResponse.FromString
        self._request = service_pb2.ModelInferRequest
        self.closings: set[asyncio.Task[None]] = set()
        self.cycle = RequestCycle(len(payload.requests), scheduler.index)
        self.values = AnswerCheck(payload.values) if payload.values is not None else None

    def id_prefix(self, request_id: str) -> bytes:
        return self._request(id=request_id).SerializeToString()

    def connection(self) -> GrpcStreamConnection:
        return GrpcStreamConnection(self.w, self)

    def closing(self, channel: Any) -> None:
        self.spawn(channel.close())

    def spawn(self, coro: Any) -> asyncio.Task[None]:
        """Run ``coro`` in the background, kept until it ends (channels closing)."""
        return self._keep(self.w.loop.create_task(coro))

    def start(self, coro: Any) -> asyncio.Task[None] | None:
        """Run ``coro`` now up to its first wait, the rest in the background (writes); None if it
        ended there."""
        task = start_eagerly(coro, self.w.loop)
        return self._keep(task) if task is not None else None

    def _keep(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        self.closings.add(task)
        task.add_done_callback(self.closings.discard)
        return task

    async def open(self, conns: list[Connection], at_ns: int) -> BaseException | None:
        plan = self.w.plan
        timeout_s = plan.timeout_ns / 1e9 if plan is not None else 10.0
        if at_ns:
            ahead = (at_ns - monotonic_ns()) / 1e9
            if ahead > 0:
                await asyncio.sleep(ahead)
        mine = [c for c in conns if isinstance(c, GrpcStreamConnection)]
        errors = await asyncio.gather(*(self._ready(c, timeout_s) for c in mine))
        return next((e for e in errors if e is not None), None)

    async def _ready(self, conn: GrpcStreamConnection, timeout_s: float) -> BaseException | None:
        channel = conn.new_stream()
        try:
            await channel_ready(channel, timeout_s, self.payload.address)
        except (TimeoutError, OSError) as exc:
            if conn.channel is channel:
                conn.close_channel()
            return exc
        if conn.channel is not channel:
            return None  # aborted meanwhile
        conn.start_stream()
        conn.connected = True
        return None


class GrpcStreamTransport:
    async def prepare(self, sweep: SweepInputs) -> Prepared:
        prepared = await GrpcTransport().prepare(sweep)
        service_pb2 = messages()
        flag = service_pb2.ModelInferRequest()
        flag.parameters[ENABLE_EMPTY_FINAL].bool_param = True
        extra = flag.SerializeToString()  # merged into each request: map entries add up
        payload: GrpcPayload = prepared.payload
        payload.requests = tuple(r + extra for r in payload.requests)
        return Prepared(payload, prepared.request_bytes + len(extra), prepared.cleanup)

    def dialer(self, scheduler: Scheduler, payload: Any) -> Dialer:
        return GrpcStreamDialer(scheduler, payload)


TRANSPORT = GrpcStreamTransport()
