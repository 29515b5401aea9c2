"""A chunked ``text/event-stream`` body (server-sent events over HTTP/1.1), framed as its bytes
arrive: the chunks, then the events in them, each event's ``data:`` handed on whole.

Shared by every streaming transport that reads SSE (Triton's generate_stream, OpenAI's streamed
completions). Bounded as every reader is: a chunk's size line, a chunk, an event; each byte is
searched once (linear however the server splits its writes). Standard library only: load workers
import it.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.net.http1 import BadResponse

MAX_EVENT = 1 << 20  # bytes of one event (and of one chunk) before it is refused
MAX_SIZE_LINE = 1024  # bytes of a chunk's size line (its extensions included)


class ChunkedEvents:
    """One answer's body. ``feed`` the bytes after the head as they come; ``on_data(data)`` is
    called for each event's joined ``data:`` lines (events without data are skipped). An event
    past MAX_EVENT sets ``oversized`` and is dropped (the caller refuses the answer).

    ``whole``: the body is not an event stream but one document sent in chunks (a JSON answer):
    its bytes gather in ``sse``, up to ``limit``, and ``on_data`` is never called."""

    __slots__ = ("buf", "limit", "on_data", "oversized", "pos", "scanned", "sse", "whole")

    def __init__(self, on_data: Callable[[bytes], None], whole: bool = False, limit: int = MAX_EVENT) -> None:
        self.on_data = on_data
        self.whole, self.limit = whole, limit
        self.buf = bytearray()
        self.pos = 0  # where the next chunk's size line starts in buf
        self.sse = bytearray()
        self.scanned = 0  # bytes of sse searched for an event's end
        self.oversized = False

    def feed(self, data: bytes | bytearray) -> bool:
        """Frame what arrived; True at the body's last chunk. Raises BadResponse for bytes that
        are not a chunked body."""
        buf = self.buf
        buf += data
        while True:
            eol = buf.find(b"\r\n", self.pos, self.pos + MAX_SIZE_LINE + 2)
            if eol < 0:
                if len(buf) - self.pos > MAX_SIZE_LINE:
                    raise BadResponse(f"a chunk size line longer than {MAX_SIZE_LINE} bytes: "
                                      f"{bytes(buf[self.pos : self.pos + 20])!r}...")
                return False
            text = bytes(buf[self.pos : eol]).split(b";")[0].strip()
            try:
                size = int(text, 16)
            except ValueError:
                raise BadResponse(f"a broken chunk size {text[:20]!r}") from None
            if not 0 <= size <= self.limit:
                raise BadResponse(f"the server announced a chunk of {size} bytes, outside 0..{self.limit}")
            if size == 0:
                if len(buf) < eol + 4:
                    return False
                if buf[eol + 2 : eol + 4] != b"\r\n" or len(buf) > eol + 4:
                    raise BadResponse("more bytes than the answer holds")
                return True
            end = eol + 2 + size
            if len(buf) < end + 2:
                return False
            if buf[end : end + 2] != b"\r\n":
                raise BadResponse(f"a chunk of {size} bytes not followed by CRLF")
            piece = buf[eol + 2 : end]
            if self.whole:
                self.sse += piece
                del buf[: end + 2]
                self.pos = 0
                if len(self.sse) > self.limit:
                    self.oversized = True
                    self.sse.clear()
                continue
            self.sse += piece.replace(b"\r\n", b"\n") if b"\r" in piece else piece  # CRLF lines, as SSE allows
            del buf[: end + 2]
            self.pos = 0
            self._events()

    def _events(self) -> None:
        sse = self.sse
        # from where the last search stopped (less the byte a blank line may straddle): linear
        while (cut := sse.find(b"\n\n", max(0, self.scanned - 1))) >= 0:
            event = bytes(sse[:cut])
            del sse[: cut + 2]
            self.scanned = 0
            data = b"".join(line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:"))
            if data:
                self.on_data(data)
        self.scanned = len(sse)
        if len(sse) > MAX_EVENT:
            self.oversized = True
            sse.clear()
            self.scanned = 0
