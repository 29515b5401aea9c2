"""The OpenAI API behind the load engine's seam (engine/load/server_api.py's ServerApi): one model
of an OpenAI-compatible server (vLLM, SGLang, TensorRT-LLM's trtllm-serve, llama.cpp's server,
Triton's OpenAI frontend), its four transports (chat and completions, streamed or whole), the
prompts, no server statistics (the server split reads "not measured"), the server's cache from
its /metrics (every replica's, engine/openai/server_metrics.py), the /v1/models probe.

``OpenAiApi(target, key)`` is what ``run_sweep`` takes (``target``: engine/openai/target.py's
open_target; ``key``: the API key or None).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import UserError
from engine.events import Event, InputDataUsed
from engine.net import http1
from engine.openai.requests import (
    Prompt,
    body,
    http_request,
    read_jsonl,
    request_headers,
    synthetic,
)
from engine.openai.server_metrics import ReplicaCaches
from engine.openai.sessions import Session
from engine.openai.target import OpenAiTarget, auth_headers
from engine.openai.transport import OpenAiPayload
from engine.transport_table import OPENAI, TRANSPORTS

if TYPE_CHECKING:
    from engine.profiles import Load

Publish = Callable[[Event], None]
PATHS = {True: "/chat/completions", False: "/completions"}  # under the URL's /v1
PROBES = 3
PROBE_TIMEOUT_S = 2.0
POLL_S = 0.5


@dataclass(frozen=True)
class OpenAiEndpoint:
    name: str
    http_url: str


@dataclass
class OpenAiPrepared:
    payload: OpenAiPayload
    request_bytes: int

    async def close(self) -> None:
        return None


class OpenAiApi:
    """One model of one OpenAI-compatible server."""

    decoupled = True  # a completion is a stream of tokens: its server time is not split
    stats = None  # no statistics extension: the levels carry no server breakdown
    round_trip_method = "GET /v1/models probe"

    def __init__(self, target: OpenAiTarget, key: str | None, more_urls: Sequence[str] = ()) -> None:
        self.target, self.key = target, key
        # several servers of the same model (replicas, server.urls): the load spreads over them
        # (engine/load/spread.py); the key goes to their own host:port only
        self.urls = [target.url, *(u.rstrip("/") for u in more_urls)]
        self.parsed = [http1.parse_endpoint(u) for u in self.urls]
        self.endpoint = self.parsed[0]
        # every server's /metrics, the cache figures over them all (engine/openai/server_metrics.py)
        self.cache = ReplicaCaches(self.urls, auth_headers(key))
        self.trace_times: tuple[float, ...] | None = None  # a Mooncake trace's timestamps (load.arrival = "trace")

    @property
    def model(self) -> str:
        return self.target.model

    def endpoints(self) -> list[OpenAiEndpoint]:
        return [OpenAiEndpoint(f"ep{i + 1}", u) for i, u in enumerate(self.urls)]

    def transport(self, load: Load) -> str:
        spec = TRANSPORTS.get(load.transport)
        if spec is None or spec.api != OPENAI:
            offered = ", ".join(t.name for t in TRANSPORTS.values() if t.api == OPENAI)
            raise UserError(f"load.transport: the OpenAI API offers {offered}, found {load.transport!r}")
        if load.batch_size != 1:
            raise UserError("load.batch_size: an OpenAI request carries one prompt: expected 1, "
                            f"found {load.batch_size}")
        if load.tokens_from:
            raise UserError("load.tokens_from: the OpenAI API counts tokens from the server's usage; leave it unset")
        if load.turns > 1 and not spec.name.startswith("chat"):
            raise UserError(f"load.turns: a multi-turn session is a chat: expected load.transport 'chat_stream' or "
                            f"'chat', found {spec.name!r}")
        return spec.module

    async def requests(self, load: Load, publish: Publish, stop: asyncio.Event) -> list[Prompt]:
        if load.input_data:
            made = await asyncio.to_thread(read_jsonl, load.input_data, load.output_tokens, load.block_tokens)
        else:
            made = synthetic(load.input_tokens, load.output_tokens, load.distinct_prompts, load.prefix_groups,
                             load.prefix_tokens)
        if stop.is_set():
            return []
        self.trace_times = made.times or None
        publish(InputDataUsed(path=made.label, sha256=made.sha256, entries=len(made.prompts),
                              requests=len(made.prompts), source=made.source))
        return made.prompts

    async def prepare(self, load: Load, requests: Sequence[object], gpus: tuple[int, ...]) -> list[OpenAiPrepared]:
        spec = TRANSPORTS[load.transport]  # checked by transport(), before any load
        chat, stream = spec.name.startswith("chat"), spec.name.endswith("_stream")
        prompts = [r for r in requests if isinstance(r, Prompt)]
        out = []
        for ep in self.parsed:  # one per endpoint: each request names its own host
            raws = tuple(http_request(ep, PATHS[chat], body(self.model, p, chat, stream, load.ignore_eos), stream, self.key)
                         for p in prompts)
            session = None
            if load.turns > 1:  # each request built at send time from its prompt's body (engine/openai/sessions.py)
                session = Session(load.turns, ep, PATHS[chat], request_headers(stream, self.key),
                                  tuple(body(self.model, p, chat, stream, load.ignore_eos) for p in prompts))
            payload = OpenAiPayload(ep.host, ep.port, ep.tls, ep.host, raws, chat, stream,
                                    tuple(p.max_tokens for p in prompts), tuple(p.words for p in prompts), session)
            out.append(OpenAiPrepared(payload, sum(len(r) for r in raws) // max(1, len(raws))))
        return out

    async def round_trip(self) -> float | None:
        """The fastest of a few ``GET /v1/models`` on fresh connections, write to first byte."""
        raw = http1.encode_request("GET", self.endpoint, "/models", {"Connection": "close", **auth_headers(self.key)})
        best: float | None = None
        for _ in range(PROBES):
            try:
                took = await asyncio.wait_for(self._one(raw), PROBE_TIMEOUT_S)
            except (OSError, TimeoutError):
                break
            best = took if best is None else min(best, took)
        return best

    async def _one(self, raw: bytes) -> float:
        ep = self.endpoint
        reader, writer = await asyncio.open_connection(ep.host, ep.port, ssl=http1.ssl_context(ep))
        try:
            started = time.perf_counter()
            writer.write(raw)
            await writer.drain()
            if not await reader.read(1):
                raise ConnectionError("closed before answering")
            return time.perf_counter() - started
        finally:
            writer.close()

    async def wait_ready(self, endpoint: int, stop: asyncio.Event, timeout_s: float) -> float | None:
        """Seconds until ``GET /v1/models`` answers 200 again; None on timeout or stop."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s and not stop.is_set():
            left = timeout_s - (time.monotonic() - start)
            try:
                reply = await http1.request(self.urls[endpoint], "/models", headers=auth_headers(self.key),
                                            timeout_s=max(0.05, min(5.0, left)))
                if reply.status == 200:
                    return time.monotonic() - start
            except (OSError, TimeoutError, http1.BadResponse):
                pass
            try:
                await asyncio.wait_for(stop.wait(), POLL_S)
            except TimeoutError:
                pass
        return None
