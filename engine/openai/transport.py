"""load.transport = chat_stream, chat, completions_stream, completions: OpenAI's
``POST /v1/chat/completions`` and ``POST /v1/completions`` over HTTP/1.1 keep-alive connections,
streamed (server-sent events, ``"stream": true`` with usage in the last chunk) or whole.

Each request's bytes are encoded once per sweep in the session (engine/openai/requests.py) and
sent whole, one at a time per connection. A streamed answer is framed by engine/net/sse.py; each
chunk that carries text is one response, stamped with the kernel's receive time (the first:
TTFT; the gaps between the next: ITL; chunks read at once share a stamp, their gaps not
measured). A whole answer is one response at its last byte. The answer is checked
(engine/openai/answer.py): text, a finish_reason, ``data: [DONE]`` at a stream's end, sane usage;
an error object, in the stream or as the body, refuses the request in the server's words. Output
and input tokens are the server's usage; without usage, the words (flagged: not tokens).
Every line is bounded (the head, a chunk's size line, an event, a whole body). Standard library
only: load workers import it.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from engine.net.connection import (
    MALFORMED_ANSWER,
    REJECTED,
    RESPONSE_TOO_LARGE,
    SERVER_ERROR,
    Connection,
    Dialer,
    RequestCycle,
    Scheduler,
    StreamTimes,
    first_line,
)
from engine.net.http1 import BadResponse, Head, parse_head
from engine.net.sse import MAX_EVENT, ChunkedEvents
from engine.net.stamped_socket import arrival
from engine.net.tcp import TcpDialer
from engine.openai.answer import Answer, error_words
from engine.openai.sessions import Conversation, Session

monotonic_ns = time.monotonic_ns
MAX_BODY = 16 << 20  # a whole (not streamed) answer, or an error body, past this is refused
MAX_CHUNKS = 1 << 20  # chunks of text in one answer before it is refused (each keeps a gap: bounded memory)
DONE = b"[DONE]"
KEY_REFUSED = "the server refused the API key"


@dataclass
class OpenAiPayload:
    host: str
    port: int
    tls: bool
    server_hostname: str
    requests: tuple[bytes, ...]  # each whole HTTP request, sent in turn
    chat: bool  # chat completions (else completions)
    stream: bool  # "stream": true
    max_tokens: tuple[int | None, ...]  # each request's max_tokens (None: not asked)
    prompt_words: tuple[int, ...]  # each request's prompt words (input tokens where usage is missing)
    # multi-turn sessions (load.turns > 1, chat only): each request's body, its user message the
    # next turn's; the request is built at send time (engine/openai/sessions.py)
    session: Session | None = None


def status_words(status: int, body: bytes) -> tuple[str, str]:
    """An answer that is not 200, as (kind, one line): 401 names the key, the rest the server's words."""
    said = ""
    if body:
        try:
            value = json.loads(body[:65536])
            said = error_words(value.get("error", value)) if isinstance(value, dict) else ""
        except (ValueError, RecursionError):
            said = " ".join(body[:200].decode("utf-8", "replace").split())
    if status == 401:
        return REJECTED, f"HTTP 401: {KEY_REFUSED}" + (f" ({said})" if said else "")
    return (REJECTED if status < 500 else SERVER_ERROR), f"HTTP {status}" + (f": {said}" if said else "")


class OpenAiConnection(Connection, asyncio.Protocol):
    """One keep-alive connection carrying at most one completion request at a time."""

    def __init__(self, scheduler: Scheduler, dialer: OpenAiDialer) -> None:
        super().__init__(scheduler)
        self.dialer = dialer
        self.payload = dialer.payload
        self.tr: asyncio.Transport | None = None
        self.sent_index = 0
        self.answered_here = 0  # answers completed on this socket: a reused one can be closed under us
        self.got_bytes = False  # bytes of the answer to the request in flight
        # this user's conversation (a multi-turn session): kept across reconnects, as the user is
        self.conversation = Conversation(self.payload.session) if self.payload.session is not None else None
        self._reset()

    def _reset(self) -> None:
        self.buf = bytearray()  # the head, then (a whole answer) its body
        self.head: Head | None = None
        self.events = ChunkedEvents(self._event) if self.payload.stream else None
        self.whole: ChunkedEvents | None = None  # a body sent in chunks that is not an event stream
        self.cut = False  # an error answer read no further: the connection is closed after it
        self.now = 0
        self.done = False  # data: [DONE] seen
        self.after_done = False  # an event after [DONE]
        self.answer = Answer(self.payload.chat, keep_text=self.conversation is not None)
        self.times = StreamTimes()
        self.stream = self.times

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport  # type: ignore[assignment]
        self.connected = True
        self.answered_here = 0
        self._reset()

    def connection_lost(self, exc: Exception | None) -> None:
        # Closed by the server as the next request went out on a socket that had answered
        # (llama.cpp's server closes after each streamed answer, keep-alive header or not): the
        # dialer learns it, and from then each answer ends its connection, so the next request
        # goes out on a fresh one. The request that crossed the close is sent again, not lost: the
        # server read nothing of it (no byte came back; a close with our request unread in its
        # buffer reaches us as a reset). Bounded: once learnt, no request goes out on a connection
        # that has answered, so none goes again.
        if (exc is None or isinstance(exc, ConnectionResetError)) and self.busy and not self.got_bytes and self.answered_here:
            self.dialer.closes_after_answer = True
            self.resend = True  # the server never read it: it goes again (every connection may cross one)
        if self.busy and self.conversation is not None:  # the turn in flight is lost (or goes again): its conversation ends
            self.conversation.answered(None)
        self.tr = None
        self.connected = False
        self.w.lost(self, exc)

    def data_received(self, data: bytes) -> None:
        now = arrival(self.tr, self.w.selector, self.sent_ns)  # the kernel's receive time (stamped_socket)
        self.got_bytes = True
        if not self.busy:
            self.w.unexpected(self, "bytes received with no request in flight")
            return
        try:
            ended = self._take(data, now)
            verdict = self._verdict() if ended else None
        except BadResponse as exc:
            self._fail(str(exc))
            return
        except Exception as exc:  # whatever the server's bytes make a parser raise: its answer, never ours
            self._fail(f"an answer that does not parse: {first_line(exc)}")
            return
        if ended:
            self._finish(verdict)

    def _take(self, data: bytes, now: int) -> bool:
        """Frame what arrived; True once the answer is whole."""
        self.now = now
        head = self.head
        if head is None:
            self.buf += data
            head = parse_head(self.buf, len(self.buf), start=max(0, len(self.buf) - len(data) - 3))
            if head is None:
                return False
            self.head = head
            data, self.buf = bytes(self.buf[head.head_len :]), bytearray()
            if head.status == 200 and self.events is not None and not head.chunked:
                raise BadResponse("a streamed answer that is not a chunked event stream")
        if head.status == 200 and self.events is not None:
            ended = self.events.feed(data)
            if self.events.oversized:
                raise BadResponse(f"{RESPONSE_TOO_LARGE}: an event past {MAX_EVENT} bytes")
            return ended
        return self._whole(data)

    def _whole(self, data: bytes) -> bool:
        """A body read whole (a complete answer, or an error): True when all of it is here (in buf)."""
        head = self.head
        assert head is not None
        if head.chunked:
            if self.whole is None:
                self.whole = ChunkedEvents(self._event, whole=True, limit=MAX_BODY)
            ended = self.whole.feed(data)
            if self.whole.oversized:
                raise BadResponse(f"{RESPONSE_TOO_LARGE}: an answer past {MAX_BODY} bytes")
            if ended:
                self.buf = self.whole.sse
            return ended
        self.buf += data
        if head.content_length is None and head.status != 200:
            self.cut = True  # an error whose body ends with the connection: what came says why
            return True
        if head.content_length is None:
            raise BadResponse("an answer without Content-Length or chunks")
        if head.content_length > MAX_BODY:
            raise BadResponse(f"{RESPONSE_TOO_LARGE}: an answer of {head.content_length} bytes, past {MAX_BODY}")
        if len(self.buf) < head.content_length:
            return False
        if len(self.buf) > head.content_length:
            raise BadResponse("more bytes than the answer holds")
        return True

    def _event(self, data: bytes) -> None:
        if self.done:
            self.after_done = True
            return
        if data == DONE:
            self.done = True
            return
        try:
            value = json.loads(data)
        except Exception as exc:  # ValueError, and RecursionError for deeply nested JSON
            self.answer.problem = self.answer.problem or f"a chunk whose data is not JSON ({first_line(exc)})"
            return
        if self.answer.take(value, True):
            if self.times.responses >= MAX_CHUNKS:
                raise BadResponse(f"{RESPONSE_TOO_LARGE}: an answer of more than {MAX_CHUNKS} chunks")
            self.times.add(self.now, 0)

    def _verdict(self) -> tuple[str, str] | None:
        """The whole answer read: what is wrong with it as (kind, one line), or None (its tokens set)."""
        head = self.head
        assert head is not None
        body, self.buf = bytes(self.buf), bytearray()
        if head.status != 200:
            return status_words(head.status, body)
        answer = self.answer
        if not self.payload.stream:  # a whole answer: one response at its last byte
            try:
                value = json.loads(body)
            except Exception as exc:  # ValueError, and RecursionError for deeply nested JSON
                answer.problem = f"an answer that is not JSON ({first_line(exc)})"
            else:
                if answer.take(value, False):
                    self.times.add(self.now, 0)
        if answer.error is not None:
            return SERVER_ERROR, f"the server's error: {answer.error}"
        if self.payload.stream and not self.done:
            return MALFORMED_ANSWER, "the stream ended without data: [DONE]: cut short"
        if self.after_done:
            return MALFORMED_ANSWER, "a chunk after data: [DONE]"
        wrong = answer.verdict(self.payload.max_tokens[self.sent_index])
        if wrong is not None:
            return MALFORMED_ANSWER, wrong
        times = self.times
        if answer.output_tokens is not None and answer.input_tokens is not None:
            times.tokens, times.input_tokens = answer.output_tokens, answer.input_tokens
            times.cached_tokens = answer.cached_tokens if answer.cached_tokens is not None else -1
        else:  # no usage: the words, and the level says so
            times.tokens, times.input_tokens = answer.words, self.payload.prompt_words[self.sent_index]
            times.worded = True
        return None

    def _finish(self, problem: tuple[str, str] | None) -> None:
        """Report the whole answer to the scheduler: refused in one line, or answered."""
        assert self.head is not None
        self.first_ns = monotonic_ns()
        self.answered_here += 1
        close = self.head.close or self.cut or self.dialer.closes_after_answer
        if self.conversation is not None:  # the answer joins the conversation; a failed turn ends it
            self.conversation.answered("".join(self.answer.texts or ()) if problem is None else None)
        if problem is not None:
            self._reset()
            self.w.rejected(self, problem[0], problem[1], close)
            return
        self.head = None
        self.w.answered(self, close)

    # -- Connection

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = self.written_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        self.got_bytes = False
        self._reset()
        self.sent_index = self.dialer.cycle.take()
        if self.conversation is not None:  # the conversation so far and this turn's user message
            self.tr.write(self.conversation.request(self.sent_index))  # type: ignore[union-attr]
        else:
            self.tr.write(self.payload.requests[self.sent_index])  # type: ignore[union-attr]
        return now

    def abort(self) -> None:
        if self.tr is not None:
            self.tr.abort()

    def _fail(self, message: str) -> None:
        kind = RESPONSE_TOO_LARGE if message.startswith(RESPONSE_TOO_LARGE) else MALFORMED_ANSWER
        if self.conversation is not None:
            self.conversation.answered(None)
        self._reset()
        self.w.failed(self, kind, message)


class OpenAiDialer(TcpDialer):
    stamped = True

    def __init__(self, scheduler: Scheduler, payload: OpenAiPayload) -> None:
        super().__init__(scheduler, payload.host, payload.port, payload.tls, payload.server_hostname)
        self.payload = payload
        self.cycle = RequestCycle(len(payload.requests), scheduler.index)
        self.closes_after_answer = False  # learnt: the server closes a connection after each answer

    def connection(self) -> OpenAiConnection:
        return OpenAiConnection(self.w, self)


class OpenAiTransport:
    def dialer(self, scheduler: Scheduler, payload: Any) -> Dialer:
        return OpenAiDialer(scheduler, payload)


TRANSPORT = OpenAiTransport()
