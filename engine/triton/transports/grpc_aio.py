"""load.transport = grpc_aio: KServe v2 ``ModelInfer`` over grpcio's asyncio API (grpc.aio), the
way load.transport = grpc went until it moved onto our own HTTP/2 (transports/grpc.py); kept for a
release as an A/B anchor (bench grpc_h2 runs the two side by side), then to go.

The requests are the gRPC transports' (grpc_common.GrpcRequests: serialised once per sweep);
every connection sends those bytes through a method whose request serialiser is the identity. A
connection is one grpc channel with its own subchannel (its own TCP connection: channels
otherwise share one per address), carrying one call at a time. Each answer is parsed and checked
as grpc's are. gRPC has no per-byte timings here: written_ns = sent_ns, first_ns = the answer in
our hands; what grpcio's Python layer takes in the loop before the call starts (``own_ns``) and
after the answer reached the loop (``unread_ns``) is timed per call as our side's
(engine/load/audit.py). ``load.dev_grpc_sync`` sends through grpcio's synchronous API instead.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

import grpc  # grpcio; its asyncio API is grpc.aio

from engine.net.connection import (
    MALFORMED_ANSWER,
    WRONG_ANSWER,
    Connection,
    Dialer,
    RequestCycle,
    Scheduler,
)
from engine.triton.answer_check import AnswerCheck
from engine.triton.transports.grpc_common import (
    BROKEN,
    GrpcPayload,
    GrpcRequests,
    check_answer,
    error_kind,
    messages,
)

monotonic_ns = time.monotonic_ns
METHOD = "/inference.GRPCInferenceService/ModelInfer"
# every channel its own TCP connection; requests of any size (images, batches); no hidden retries.
# Answers are capped as the HTTP transports cap them (answer_check.response_cap)
CHANNEL_OPTIONS = (
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.max_send_message_length", -1),
    ("grpc.enable_retries", 0),
)


def open_channel(address: str, tls: bool, max_answer: int) -> Any:
    """One grpc.aio channel to ``address`` with our options."""
    options = (*CHANNEL_OPTIONS, ("grpc.max_receive_message_length", max_answer))
    if tls:
        return grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(), options=options)
    return grpc.aio.insecure_channel(address, options=options)


async def channel_ready(channel: Any, timeout_s: float, address: str) -> None:
    """Wait until ``channel`` is connected; ConnectionRefusedError when it fails, TimeoutError
    past ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        state = channel.get_state(try_to_connect=True)
        while state != grpc.ChannelConnectivity.READY:
            if state in (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN):
                raise ConnectionRefusedError(f"cannot connect to {address} over gRPC")
            await channel.wait_for_state_change(state)
            state = channel.get_state(try_to_connect=True)


class GrpcSyncConnection(Connection):
    """A gRPC connection through grpcio's synchronous API (``future()``), for A/B runs
    (``load.dev_grpc_sync``): the done-callback runs on grpc's own thread (one per channel, started
    again for each call once the last one ended), and hands the answer to the worker's loop. Timed
    as ours: starting the call (``own_ns``) and the hand-over (from first_ns). Slower than grpc.aio
    on the CPU box (docs/results/grpc_fidelity_h200.md)."""

    def __init__(self, scheduler: Scheduler, dialer: GrpcDialer) -> None:
        super().__init__(scheduler)
        self.dialer = dialer
        self.payload = dialer.payload
        self.channel: Any = None  # grpc.Channel
        self.infer: Any = None  # its ModelInfer method, bytes in, ModelInferResponse out
        self.call: Any = None  # the call in flight (a grpc.Future)

    def new_channel(self) -> Any:
        self.close_channel()
        p = self.payload
        options = (*CHANNEL_OPTIONS, ("grpc.max_receive_message_length", p.max_answer))
        if p.tls:
            self.channel = grpc.secure_channel(p.address, grpc.ssl_channel_credentials(), options=options)
        else:
            self.channel = grpc.insecure_channel(p.address, options=options)
        self.infer = self.channel.unary_unary(METHOD, request_serializer=None,
                                              response_deserializer=self.dialer.parse)
        return self.channel

    def close_channel(self) -> None:
        channel, self.channel, self.infer, self.call = self.channel, None, None, None
        if channel is not None:
            self.dialer.closing(channel)

    # -- Connection

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        infer, sent = self.infer, self.dialer.cycle.take()
        call = infer.future(self.payload.requests[sent], metadata=self.payload.metadata or None)
        self.call = call
        self.written_ns = monotonic_ns()
        self.own_ns = self.written_ns - now  # grpcio starting the call: ours, in the latency
        call.add_done_callback(functools.partial(self.dialer.done, self, infer, sent))
        return now

    def finished(self, call: Any, infer: Any, sent: int, done_ns: int) -> None:
        """In the loop: the call ended (grpc's thread saw it end at ``done_ns``)."""
        if infer is not self.infer:
            return  # a call of a channel since closed
        self.first_ns = done_ns
        self.call = None
        try:
            reply = call.result()
        except grpc.FutureCancelledError:
            return  # aborted: abort() reported it
        except grpc.RpcError as exc:
            code = exc.code()
            details = " ".join((exc.details() or "").split())[:200]
            if code.name in BROKEN:
                # the connection broke (the server went away)
                self._gone(ConnectionResetError(f"gRPC {code.name}: {details}"))
                return
            self.w.rejected(self, error_kind(code.name, details), f"gRPC {code.name}: {details}", False)
            return
        problem = check_answer(reply, self.payload.outputs)
        if problem is not None:
            self.w.rejected(self, MALFORMED_ANSWER, problem, False)
            return
        values = self.dialer.values
        if values is not None:
            problem = values.check_raw(dict(zip((o.name for o in reply.outputs), reply.raw_output_contents,
                                                strict=True)), sent)
            if problem is not None:
                self.w.rejected(self, WRONG_ANSWER, problem, False)
                return
        self.w.answered(self, False)

    def _gone(self, exc: BaseException | None) -> None:
        self.close_channel()
        self.connected = False
        self.w.lost(self, exc)

    def abort(self) -> None:
        call = self.call
        was_open = self.connected
        self.connected = False
        self.close_channel()  # the call in flight is cancelled with its channel
        if call is not None:
            call.cancel()
        if was_open:  # as a socket's connection_lost: later, from the loop
            self.w.loop.call_soon(self.w.lost, self, None)


class GrpcConnection(GrpcSyncConnection):
    """One gRPC channel (one TCP connection) over grpc.aio, on the worker's loop, carrying at most
    one call at a time. grpcio's part of a call runs in the loop, between our timestamps; what
    of it is ours to time is timed per call: from ``send`` to the call built (the loop's delay
    before the call's first step, and grpcio building it: ``own_ns``), and, at the answer, since
    the loop last asked the kernel for events without waiting (``unread_ns``: grpc.aio's
    completion handling, and the loop's other work the answer waited behind)."""

    def new_channel(self) -> Any:
        self.close_channel()
        p = self.payload
        self.channel = open_channel(p.address, p.tls, p.max_answer)
        self.infer = self.channel.unary_unary(METHOD, request_serializer=None,
                                              response_deserializer=self.dialer.parse)
        return self.channel

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = self.written_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        self.call = self.w.loop.create_task(self._call(self.infer, self.dialer.cycle.take()))
        return now

    async def _call(self, infer: Any, sent: int) -> None:
        try:
            call = infer(self.payload.requests[sent], metadata=self.payload.metadata or None)
            self.own_ns = monotonic_ns() - self.sent_ns
            reply = await call
        except asyncio.CancelledError:
            return  # aborted: abort() reported it
        except grpc.aio.AioRpcError as exc:
            self.finished(Ended(None, exc), infer, sent, self.answer_ns())
            return
        self.finished(Ended(reply, None), infer, sent, self.answer_ns())

    def answer_ns(self) -> int:
        """Now, the answer in our hands; ``unread_ns``: since when it may have waited in the loop."""
        now = monotonic_ns()
        selector = self.w.selector
        self.unread_ns = now - selector.unread_since() if selector is not None else 0
        return now


class Ended:
    """A grpc.aio call's outcome, read as a finished future() call is (``result()``)."""

    __slots__ = ("error", "reply")

    def __init__(self, reply: Any, error: BaseException | None) -> None:
        self.reply, self.error = reply, error

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.reply


class GrpcDialer(Dialer):
    def __init__(self, scheduler: Scheduler, payload: GrpcPayload) -> None:
        self.w = scheduler
        self.payload = payload
        self.parse = messages().ModelInferResponse.FromString
        self.closings: set[asyncio.Future[None]] = set()
        self.cycle = RequestCycle(len(payload.requests), scheduler.index)  # shared by the worker's connections
        self.values = AnswerCheck(payload.values) if payload.values is not None else None

    def connection(self) -> GrpcSyncConnection:
        if self.w.dev.grpc_sync:
            return GrpcSyncConnection(self.w, self)
        return GrpcConnection(self.w, self)

    def done(self, conn: GrpcSyncConnection, infer: Any, sent: int, call: Any) -> None:
        """grpc's thread: a call ended; its time now, the rest in the loop."""
        done_ns = monotonic_ns()
        try:
            self.w.loop.call_soon_threadsafe(conn.finished, call, infer, sent, done_ns)
        except RuntimeError:
            pass  # the loop is closed: the worker is gone

    def closing(self, channel: Any) -> None:
        """Close ``channel`` in the background (its calls are cancelled at once)."""
        if isinstance(channel, grpc.aio.Channel):
            task: asyncio.Future[None] = self.w.loop.create_task(channel.close())
        else:
            task = self.w.loop.run_in_executor(None, channel.close)
        self.closings.add(task)
        task.add_done_callback(self.closings.discard)

    async def open(self, conns: list[Connection], at_ns: int) -> BaseException | None:
        plan = self.w.plan
        timeout_s = plan.timeout_ns / 1e9 if plan is not None else 10.0
        if at_ns:
            ahead = (at_ns - monotonic_ns()) / 1e9
            if ahead > 0:
                await asyncio.sleep(ahead)
        grpc_conns = [c for c in conns if isinstance(c, GrpcSyncConnection)]
        errors = await asyncio.gather(*(self._ready(c, timeout_s) for c in grpc_conns))
        return next((e for e in errors if e is not None), None)

    async def _ready(self, conn: GrpcSyncConnection, timeout_s: float) -> BaseException | None:
        """Connect ``conn``'s new channel; an error when it fails or is not ready in time."""
        channel = conn.new_channel()
        try:
            if isinstance(channel, grpc.aio.Channel):
                await channel_ready(channel, timeout_s, self.payload.address)
            else:
                await sync_channel_ready(channel, timeout_s, self.payload.address, self.w.loop)
        except (TimeoutError, OSError) as exc:
            if conn.channel is channel:
                conn.close_channel()
            return exc
        if conn.channel is not channel:
            return None  # aborted meanwhile (the level ended)
        conn.connected = True
        return None


async def sync_channel_ready(channel: Any, timeout_s: float, address: str, loop: asyncio.AbstractEventLoop) -> None:
    """Wait until the synchronous ``channel`` is connected: ConnectionRefusedError when it
    fails, TimeoutError past ``timeout_s`` (grpc reports its states on its own thread)."""
    ready: asyncio.Future[None] = loop.create_future()

    def settle(state: Any) -> None:  # in the loop
        if ready.done():
            return
        if state == grpc.ChannelConnectivity.READY:
            ready.set_result(None)
        elif state in (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN):
            ready.set_exception(ConnectionRefusedError(f"cannot connect to {address} over gRPC"))

    def seen(state: Any) -> None:  # grpc's thread
        try:
            loop.call_soon_threadsafe(settle, state)
        except RuntimeError:
            pass  # the loop is closed

    channel.subscribe(seen, try_to_connect=True)
    try:
        async with asyncio.timeout(timeout_s):
            await ready
    finally:
        channel.unsubscribe(seen)


class GrpcAioTransport(GrpcRequests):
    def dialer(self, scheduler: Scheduler, payload: Any) -> Dialer:
        return GrpcDialer(scheduler, payload)


TRANSPORT = GrpcAioTransport()
