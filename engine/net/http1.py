"""Just enough HTTP/1.1 for Triton's KServe v2 REST API, with no third-party client.

The load workers' hot path uses ``parse_head`` on raw bytes (status line, Content-Length,
Inference-Header-Content-Length). Every control call (readiness, metadata, config, statistics,
/metrics, model loads) goes through ``request``, or ``request_blocking`` from a thread without an
event loop: one bounded reader and one way to name a failure (``describe_failure``) for them all.
Kept free of heavy imports: the load worker processes import this module.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 64 * 1024  # a response head larger than this is not Triton's
CONTROL_MAX_BYTES = 16 << 20  # a control call's body (metadata, config, statistics) past this is refused
READ_BYTES = 65536


class BadResponse(Exception):
    """The bytes received are not an HTTP/1.1 response we can frame."""


class ResponseTooLarge(BadResponse):
    """A body past the caller's cap (``response_too_large``): the connection is closed."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"response_too_large: a body of more than {limit >> 20} MiB")


@dataclass(frozen=True)
class Head:
    status: int
    head_len: int  # bytes up to and including the blank line
    content_length: int | None  # None: chunked or close-delimited
    inference_header_length: int | None
    chunked: bool
    close: bool  # the server will close the connection after this response


def parse_head(buf: bytes | bytearray, length: int | None = None, start: int = 0) -> Head | None:
    """Parse a response head at the start of ``buf`` (its first ``length`` bytes); None when it
    is not complete yet. ``start``: where to search for its end (a caller that feeds bytes as
    they come searches each once). Only the head is copied, never the body."""
    n = len(buf) if length is None else length
    end = buf.find(b"\r\n\r\n", start, min(n, MAX_HEAD_BYTES + 4))
    if end < 0:
        if n > MAX_HEAD_BYTES:
            raise BadResponse("response head larger than 64 KiB")
        return None
    raw = bytes(buf[:end])
    if not raw.startswith(b"HTTP/1."):
        raise BadResponse(f"not an HTTP/1.x response: {raw[:40]!r}")
    try:
        status = int(raw[9:12])
    except ValueError:
        raise BadResponse(f"bad status line: {raw[:40]!r}") from None
    head = raw.lower()
    content_length = _header_int(head, b"\r\ncontent-length:")
    inference_len = _header_int(head, b"\r\ninference-header-content-length:")
    chunked = b"\r\ntransfer-encoding:" in head and b"chunked" in _header_value(head, b"\r\ntransfer-encoding:")
    close = b"\r\nconnection:" in head and b"close" in _header_value(head, b"\r\nconnection:")
    if raw[5:8] == b"1.0" and b"keep-alive" not in _header_value(head, b"\r\nconnection:"):
        close = True
    return Head(status, end + 4, None if chunked else content_length, inference_len, chunked, close)


def _header_value(head: bytes, name: bytes) -> bytes:
    i = head.find(name)
    if i < 0:
        return b""
    j = head.find(b"\r\n", i + 2)
    return head[i + len(name) : j if j >= 0 else len(head)].strip()


def _header_int(head: bytes, name: bytes) -> int | None:
    value = _header_value(head, name)
    if not value:
        return None
    try:
        n = int(value)
    except ValueError:
        raise BadResponse(f"bad {name[2:-1].decode()} header: {value[:20]!r}") from None
    if n < 0:
        raise BadResponse(f"negative {name[2:-1].decode()} header")
    return n


def dechunk(body: bytes) -> tuple[bytes, int] | None:
    """Decode a complete chunked body at the start of ``body``.

    Returns (payload, bytes consumed) or None while the final chunk has not arrived."""
    out = bytearray()
    pos = 0
    while True:
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            return None
        size_text = body[pos:eol].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadResponse(f"bad chunk size {size_text[:20]!r}") from None
        start = eol + 2
        if size == 0:
            # trailers end with an empty line
            end = body.find(b"\r\n\r\n", eol)
            if end < 0:
                return None
            return bytes(out), end + 4
        if len(body) < start + size + 2:
            return None
        out += body[start : start + size]
        pos = start + size + 2


def error_message(body: bytes, limit: int = 300) -> str:
    """Triton's error text from a KServe error body ({"error": "..."}), else the raw start."""
    text = body[:4096].decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
            text = parsed["error"]
    except ValueError:
        pass
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- endpoints


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    tls: bool
    base_path: str  # URL path prefix ("" for http://host:8000)

    @property
    def host_header(self) -> str:
        default = 443 if self.tls else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def parse_endpoint(url: str) -> Endpoint:
    """Split an http(s) base URL; raises ValueError with a one-line reason."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// URL with a host, found {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in URL {url!r}") from None
    tls = parts.scheme == "https"
    return Endpoint(parts.hostname, port or (443 if tls else 80), tls, parts.path.rstrip("/"))


def ssl_context(endpoint: Endpoint) -> Any:
    """A default TLS context for https, None for http (ssl imported only when needed)."""
    if not endpoint.tls:
        return None
    import ssl

    return ssl.create_default_context()


def encode_request(
    method: str, endpoint: Endpoint, path: str, headers: dict[str, str], body: bytes = b""
) -> bytes:
    lines = [f"{method} {endpoint.base_path}{path} HTTP/1.1", f"Host: {endpoint.host_header}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# --------------------------------------------------------------------------- control calls


@dataclass
class Reply:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


async def request(
    url: str,
    path: str,
    method: str = "GET",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    max_bytes: int = CONTROL_MAX_BYTES,
) -> Reply:
    """One request on a fresh connection (control plane only: not the load path). A body past
    ``max_bytes`` (however it is framed) ends the call with ResponseTooLarge.

    Raises OSError (refused, reset, unreachable), asyncio.TimeoutError or BadResponse."""
    endpoint = parse_endpoint(url)
    all_headers = {"Connection": "close", "Accept": "application/json", **(headers or {})}
    if body:
        all_headers.setdefault("Content-Type", "application/json")
    raw = encode_request(method, endpoint, path, all_headers, body)

    async def exchange() -> Reply:
        reader, writer = await asyncio.open_connection(
            endpoint.host, endpoint.port, ssl=ssl_context(endpoint)
        )
        try:
            writer.write(raw)
            await writer.drain()
            return await read_reply(reader, max_bytes)
        finally:
            writer.close()

    return await asyncio.wait_for(exchange(), timeout_s)


def request_blocking(
    url: str,
    path: str = "",
    method: str = "GET",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    max_bytes: int = CONTROL_MAX_BYTES,
) -> Reply:
    """``request`` for a caller that blocks: the server's start-up wait, the /metrics poller's
    thread, the study's model loads. Raises as ``request`` does."""
    call = request(url, path, method, body, headers, timeout_s, max_bytes)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(call)
    # called on an event loop's thread: a loop of its own on a thread of its own
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, call).result()


def describe_failure(exc: BaseException) -> str:
    """A failed control call in a few words: "connection refused", "timed out", or the error's own
    text on one line."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


async def read_reply(reader: asyncio.StreamReader, max_bytes: int) -> Reply:
    """One response from ``reader``: its head, then its body however framed, never holding
    more than ``max_bytes`` of body (plus one read)."""
    buf = bytearray()
    head = None
    while head is None:
        chunk = await reader.read(READ_BYTES)
        if not chunk:
            raise BadResponse("connection closed before a response head")
        buf += chunk
        head = parse_head(buf)
    rest = buf[head.head_len :]
    if head.chunked:
        return Reply(head.status, await _read_chunked(reader, rest, max_bytes))
    if head.content_length is None:  # close-delimited
        while chunk := await reader.read(READ_BYTES):
            rest += chunk
            if len(rest) > max_bytes:
                raise ResponseTooLarge(max_bytes)
        if len(rest) > max_bytes:
            raise ResponseTooLarge(max_bytes)
        return Reply(head.status, bytes(rest))
    if head.content_length > max_bytes:
        raise ResponseTooLarge(max_bytes)
    while len(rest) < head.content_length:
        chunk = await reader.read(READ_BYTES)
        if not chunk:
            raise BadResponse("connection closed inside the body")
        rest += chunk
    return Reply(head.status, bytes(rest[: head.content_length]))


async def _read_chunked(reader: asyncio.StreamReader, rest: bytearray, max_bytes: int) -> bytes:
    """A chunked body, decoded as it arrives (each chunk once), up to ``max_bytes``."""
    out = bytearray()
    pos = 0  # where the next chunk's size line starts in ``rest``

    async def more() -> None:
        nonlocal rest, pos
        chunk = await reader.read(READ_BYTES)
        if not chunk:
            raise BadResponse("connection closed inside a chunked body")
        del rest[:pos]  # drop what was decoded: ``rest`` holds at most a chunk and one read
        pos = 0
        rest += chunk

    while True:
        eol = rest.find(b"\r\n", pos)
        if eol < 0:
            if len(rest) - pos > 1024:
                raise BadResponse("chunk size line longer than 1 KiB")
            await more()
            continue
        size_text = bytes(rest[pos:eol]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadResponse(f"bad chunk size {size_text[:20]!r}") from None
        if size == 0:
            return bytes(out)  # trailers, if any, are left unread: the connection closes
        if len(out) + size > max_bytes:
            raise ResponseTooLarge(max_bytes)
        while len(rest) < eol + 2 + size + 2:
            await more()
            eol = rest.find(b"\r\n")  # the size line is still at the start after ``more``
        out += rest[eol + 2 : eol + 2 + size]
        pos = eol + 2 + size + 2
