"""A fake OpenAI-compatible server on loopback, for the hostile cases a real one will not play:
written on asyncio streams, HTTP/1.1 keep-alive, chunked server-sent events.

It serves ``GET /v1/models`` and ``POST /v1/chat/completions`` / ``/v1/completions``, streamed
(one word a chunk, ``gap_s`` apart, each its own TCP write; then a chunk with finish_reason, one
with usage when include_usage is asked, and ``data: [DONE]``) or whole. A "token" is a word: the
completion is max_tokens words (16 when not asked); the prompt counts its words plus
TEMPLATE_TOKENS (a chat template's), so a test tells the server's usage from our word count.

``mode`` plays a hostile server: "no_usage" (never reports usage), "error_mid" (an error object
after a few chunks), "truncated" (the stream ends without finish_reason or [DONE]), "bad_usage"
(completion_tokens far below the chunks sent), "not_openai" (answers /v1/models as Triton would:
HTTP 404), "huge_event" (one event of 2 MiB, in 64 KiB chunks, that never ends). ``key``: the API key it asks for (401 without it). ``seen_auth`` keeps every
Authorization header it was sent. ``metrics``: a Prometheus page at ``GET /metrics`` (beside /v1),
one ``name value`` line each, that a test may change between reads; ``llamacpp:prompt_tokens_total``
there counts the prompt tokens of each completion it answers (None, the default: HTTP 404).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

TEMPLATE_TOKENS = 3
DEFAULT_MAX_TOKENS = 16


class FakeOpenAi:
    def __init__(self, models: tuple[str, ...] = ("tiny-llm",), mode: str = "ok", key: str | None = None,
                 gap_s: float = 0.002, metrics: dict[str, float] | None = None) -> None:
        self.models, self.mode, self.key, self.gap_s = models, mode, key, gap_s
        self.metrics = metrics
        self.seen_auth: list[str] = []
        self.seen_messages: list[list[dict]] = []  # each chat request's messages, in arrival order
        self.completions = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    # -- HTTP

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if "authorization" in headers:
                    self.seen_auth.append(headers["authorization"])
                await self.route(method, path, headers, body, writer)
                if self.mode == "close_after_answer" and method == "POST":
                    await writer.drain()
                    break  # as llama.cpp's server does after a streamed answer, keep-alive header or not
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def route(self, method: str, path: str, headers: dict[str, str], body: bytes,
                    writer: asyncio.StreamWriter) -> None:
        if self.key is not None and headers.get("authorization") != f"Bearer {self.key}":
            return self.whole(writer, 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                                      "code": "invalid_api_key"}})
        if method == "GET" and path == "/v1/models":
            if self.mode == "not_openai":
                return self.whole(writer, 404, {"error": "Not Found"})
            return self.whole(writer, 200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "test"}
                                                                       for m in self.models]})
        if method == "GET" and path == "/metrics" and self.metrics is not None:
            page = "".join(f"{k} {v}\n" for k, v in self.metrics.items()).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (len(page), page))
            return None
        if method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            return await self.complete(path.endswith("chat/completions"), json.loads(body), writer)
        return self.whole(writer, 404, {"error": {"message": f"no route {path}", "type": "NotFoundError", "code": 404}})

    def whole(self, writer: asyncio.StreamWriter, status: int, doc: Any) -> None:
        raw = json.dumps(doc).encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n".encode()
                     + raw)

    # -- completions

    async def complete(self, chat: bool, req: dict, writer: asyncio.StreamWriter) -> None:
        if req.get("model") not in self.models:
            return self.whole(writer, 404, {"error": {"message": f"The model `{req.get('model')}` does not exist.",
                                                      "type": "NotFoundError", "code": 404}})
        self.completions += 1
        if chat:
            self.seen_messages.append(req["messages"])
        prompt = req["messages"][-1]["content"] if chat else req["prompt"]
        n = int(req.get("max_tokens") or DEFAULT_MAX_TOKENS)
        usage = {"prompt_tokens": len(prompt.split()) + TEMPLATE_TOKENS, "completion_tokens": n,
                 "total_tokens": len(prompt.split()) + TEMPLATE_TOKENS + n}
        if self.mode == "bad_usage":
            usage["completion_tokens"] = 1
        if self.metrics is not None and "llamacpp:prompt_tokens_total" in self.metrics:
            self.metrics["llamacpp:prompt_tokens_total"] += usage["prompt_tokens"]
        words = [f" word{k}" for k in range(n)]
        if not req.get("stream"):
            choice = ({"index": 0, "message": {"role": "assistant", "content": "".join(words)}, "finish_reason": "length"}
                      if chat else {"index": 0, "text": "".join(words), "finish_reason": "length"})
            doc: dict[str, Any] = {"id": "cmpl-1", "object": "chat.completion" if chat else "text_completion",
                                   "model": req["model"], "choices": [choice]}
            if self.mode != "no_usage":
                doc["usage"] = usage
            return self.whole(writer, 200, doc)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

        async def event(doc: Any) -> None:
            data = b"data: " + (doc if isinstance(doc, bytes) else json.dumps(doc).encode()) + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()

        def chunk(text: str | None, finish: str | None = None) -> dict:
            if chat:
                delta = {"content": text} if text is not None else {"role": "assistant", "content": ""}
                c = {"index": 0, "delta": delta, "finish_reason": finish}
            else:
                c = {"index": 0, "text": text or "", "finish_reason": finish}
            return {"id": "cmpl-1", "object": "chat.completion.chunk" if chat else "text_completion",
                    "model": req["model"], "choices": [c]}

        if self.mode == "huge_event":
            writer.write(b"%x\r\n%s\r\n" % (6, b"data: "))
            for _ in range(32):
                writer.write(b"%x\r\n%s\r\n" % (65536, b"x" * 65536))
                await writer.drain()
            return
        if chat:
            await event(chunk(None))
        for k, word in enumerate(words):
            if self.mode == "error_mid" and k == 2:
                await event({"error": {"message": "CUDA out of memory while decoding", "type": "InternalServerError",
                                       "code": 500}})
                break
            await asyncio.sleep(self.gap_s)
            await event(chunk(word, "length" if k == n - 1 and self.mode != "truncated" else None))
        if self.mode == "truncated":
            writer.write(b"0\r\n\r\n")
            return
        include = (req.get("stream_options") or {}).get("include_usage")
        if include and self.mode != "no_usage":
            await event({"id": "cmpl-1", "object": "chat.completion.chunk", "model": req["model"], "choices": [],
                         "usage": usage})
        await event(b"[DONE]")
        writer.write(b"0\r\n\r\n")


class FakeOpenAiThread:
    """The fake on a loop of its own, in a thread: for a test that runs the CLI in a subprocess."""

    def __init__(self, **kwargs: Any) -> None:
        self.fake = FakeOpenAi(**kwargs)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        port = asyncio.run_coroutine_threadsafe(self.fake.start(), self.loop).result(10)
        return f"http://127.0.0.1:{port}/v1"

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.fake.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
