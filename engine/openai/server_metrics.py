"""An OpenAI-compatible server's own cache figures, from its Prometheus ``/metrics`` (at the base
URL without ``/v1``), read at each window's edges as Triton's statistics are: the prefix-cache hit
rate (cached prompt tokens / prompt tokens), the KV cache's usage, preemptions and requests
waiting, by the names each server publishes:

- llama.cpp's llama-server (started with ``--metrics``): ``llamacpp:prompt_tokens_total`` counts
  the prompt tokens it computed, *excluding* those reused from its cache,
  ``llamacpp:prompt_tokens_cached_total`` those reused; ``requests_deferred`` waits. It publishes
  no KV usage (older builds' ``kv_cache_usage_ratio`` is read where present) and no preemptions.
- vLLM: ``vllm:prefix_cache_queries``/``hits`` (tokens), ``vllm:kv_cache_usage_perc`` (0..1;
  ``gpu_cache_usage_perc`` before v1), ``vllm:num_preemptions``, ``vllm:num_requests_waiting``.
- SGLang: ``sglang:prompt_tokens``/``cached_tokens``, ``sglang:token_usage`` (the KV pool's share
  in use), ``sglang:num_queue_reqs``; no preemption counter is read.

Counters are summed over their label sets (vLLM labels by engine) and taken as deltas; a counter
that went back (a restarted server) gives no figure. A server without ``/metrics``, or with none
of these names, is not measured: every figure None, never 0.

Several replicas of the model (server.urls; ``study --serve``'s ``1*N``): every replica's
``/metrics`` is read at the same edges (``ReplicaCaches``) and the figures cover them all
(``combine``): counters' deltas summed over the replicas (the hit rate is then cached over prompt
tokens of them all), requests waiting summed, KV usage the mean over the replicas with the fullest
one's beside it (``kv_usage_max``). A figure that one replica cannot give (its page not read at
either edge, its counter gone back, a name it does not publish) is None for the whole: a sum or a
mean over the replicas that answered would read as the whole fleet's and be wrong.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.events import ServerCache
from engine.net import http1

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
MAX_METRICS_BYTES = 4 << 20  # a /metrics page past this is not read


@dataclass(frozen=True)
class Names:
    """One server's metric names for each figure; several names: the first present is read."""

    server: str
    prefix: str
    prompt: tuple[str, ...]  # the prompt tokens the server took in (llama.cpp: computed, see ``prompt_adds_cached``)
    cached: tuple[str, ...]
    kv_usage: tuple[str, ...] = ()
    preemptions: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    prompt_adds_cached: bool = False  # llama.cpp's prompt counter leaves the cached tokens out


SERVERS = (
    Names("llama.cpp", "llamacpp:", ("llamacpp:prompt_tokens_total",), ("llamacpp:prompt_tokens_cached_total",),
          kv_usage=("llamacpp:kv_cache_usage_ratio",), waiting=("llamacpp:requests_deferred",),
          prompt_adds_cached=True),
    Names("vLLM", "vllm:", ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"),
          ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"),
          kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
          preemptions=("vllm:num_preemptions_total", "vllm:num_preemptions"),
          waiting=("vllm:num_requests_waiting",)),
    Names("SGLang", "sglang:", ("sglang:prompt_tokens_total", "sglang:prompt_tokens"),
          ("sglang:cached_tokens_total", "sglang:cached_tokens"),
          kv_usage=("sglang:token_usage",), waiting=("sglang:num_queue_reqs",)),
)


@dataclass(frozen=True)
class CacheSnapshot:
    names: Names
    values: dict[str, float]  # every name of ``names`` present, summed over its label sets


def parse(text: str) -> CacheSnapshot | None:
    """The figures of the first server in SERVERS whose names the page has; None for none."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:  # a value no counter or gauge of ours can have is left out
            sums[m.group(1)] = sums.get(m.group(1), 0.0) + value
    for names in SERVERS:
        if any(n.startswith(names.prefix) for n in sums):
            wanted = {*names.prompt, *names.cached, *names.kv_usage, *names.preemptions, *names.waiting}
            return CacheSnapshot(names, {k: v for k, v in sums.items() if k in wanted})
    return None


def _first(values: dict[str, float], names: tuple[str, ...]) -> float | None:
    return next((values[n] for n in names if n in values), None)


def _delta(before: CacheSnapshot, after: CacheSnapshot, names: tuple[str, ...]) -> float | None:
    a, b = _first(after.values, names), _first(before.values, names)
    if a is None or b is None or a < b:  # not published, or the server restarted in between
        return None
    return a - b


def between(before: object | None, after: object | None) -> ServerCache | None:
    """The cache over an interval from its two edges' snapshots; None where either is missing."""
    if not isinstance(before, CacheSnapshot) or not isinstance(after, CacheSnapshot) or before.names != after.names:
        return None
    n = after.names
    prompt, cached = _delta(before, after, n.prompt), _delta(before, after, n.cached)
    if n.prompt_adds_cached and prompt is not None and cached is not None:
        prompt += cached
    kv = _first(after.values, n.kv_usage)
    return ServerCache(
        server=n.server, prompt_tokens=prompt, cached_tokens=cached,
        hit_rate=cached / prompt if prompt and cached is not None else None,
        kv_usage=min(1.0, kv) if kv is not None else None, kv_usage_max=min(1.0, kv) if kv is not None else None,
        preemptions=_delta(before, after, n.preemptions), waiting=_first(after.values, n.waiting))


def served_before(snapshot: object | None) -> bool | None:
    """Whether the server had taken any prompt before ``snapshot`` (None: not known)."""
    if not isinstance(snapshot, CacheSnapshot):
        return None
    n = snapshot.names
    prompt, cached = _first(snapshot.values, n.prompt), _first(snapshot.values, n.cached)
    if prompt is None and cached is None:
        return None
    return (prompt or 0.0) + (cached or 0.0) > 0


class OpenAiCache:
    """The server's /metrics, read for its cache figures (engine/load/server_api.py's CacheStats)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        # /metrics sits beside /v1, not under it
        self.root = url[:-3] if url.rstrip("/").endswith("/v1") else url
        self.root = self.root.rstrip("/")
        self.headers = headers
        self.absent = False  # the server has no /metrics we read: stop asking
        self.server = ""  # whose names the last page had ("" before one was read)

    async def snapshot(self, timeout_s: float) -> CacheSnapshot | None:
        if self.absent:
            return None
        try:
            reply = await http1.request(self.root, "/metrics", headers={**self.headers, "Accept": "text/plain"},
                                        timeout_s=timeout_s, max_bytes=MAX_METRICS_BYTES)
        except (OSError, TimeoutError, http1.BadResponse):
            return None  # late or lost this time: this interval's figures are not measured
        if reply.status in (404, 405, 501):  # no metrics endpoint (llama-server without --metrics: 501)
            self.absent = True
            return None
        if reply.status != 200:
            return None
        found = parse(reply.body.decode("utf-8", "replace"))
        self.absent = found is None
        self.server = found.names.server if found is not None else self.server
        return found

    async def reset(self, timeout_s: float) -> str | None:
        """Empty the server's prefix cache where it offers a way (llama.cpp started with
        --slot-save-path: each slot's erase; vLLM in dev mode: /reset_prefix_cache; SGLang:
        /flush_cache); None when done, else why not, in one line."""
        if not self.server:
            await self.snapshot(timeout_s)
        paths = {"vLLM": ["/reset_prefix_cache"], "SGLang": ["/flush_cache"]}.get(self.server)
        try:
            if self.server == "llama.cpp":
                slots = await http1.request(self.root, "/slots", headers=self.headers, timeout_s=timeout_s)
                ids = [s.get("id") for s in slots.json()] if slots.status == 200 else []
                if not ids:
                    return f"llama.cpp's /slots answered HTTP {slots.status} with no slots to erase"
                paths = [f"/slots/{i}?action=erase" for i in ids if isinstance(i, int)]
            if not paths:
                return "the server's cache names none we know how to reset (llama.cpp, vLLM, SGLang)"
            for path in paths:
                reply = await http1.request(self.root, path, method="POST", body=b"{}", headers=self.headers,
                                            timeout_s=timeout_s)
                if reply.status != 200:
                    said = " ".join(reply.body[:300].decode("utf-8", "replace").split())
                    return f"POST {path}: HTTP {reply.status}: {said}"
        except (OSError, TimeoutError, ValueError, AttributeError, http1.BadResponse) as exc:
            return f"the reset failed: {type(exc).__name__}: {str(exc)[:200]}"
        return None

    def between(self, before: object | None, after: object | None) -> ServerCache | None:
        return between(before, after)

    def served_before(self, snapshot: object | None) -> bool | None:
        return served_before(snapshot)


# -- several replicas of the model: every one's /metrics, the figures over them all


@dataclass(frozen=True)
class ReplicaSnapshot:
    """Every replica's snapshot at one edge, in the replicas' order (None: that one not read)."""

    each: tuple[CacheSnapshot | None, ...]


def _over_all(values: Sequence[float | None]) -> list[float] | None:
    # one replica without the figure (not read, gone back, not published): None for the whole, as
    # a sum or mean over those that gave it would read as every replica's and be wrong
    return None if any(v is None for v in values) else [v for v in values if v is not None]


def combine(before: object | None, after: object | None) -> ServerCache | None:
    """The cache over an interval across every replica, from two edges' ReplicaSnapshots:
    counters' deltas and requests waiting summed, KV usage the replicas' mean (and their max);
    None where no replica was read at both edges."""
    if not isinstance(before, ReplicaSnapshot) or not isinstance(after, ReplicaSnapshot) \
            or len(before.each) != len(after.each):
        return None
    if len(before.each) == 1:
        return between(before.each[0], after.each[0])
    each = [between(b, a) for b, a in zip(before.each, after.each, strict=True)]
    known = [c for c in each if c is not None]
    if not known:
        return None
    server = ", ".join(dict.fromkeys(c.server for c in known))  # "llama.cpp"; mixed servers: each named once
    if len(known) < len(each):  # a replica not read at an edge: no figure covers every replica
        return ServerCache(server=server)
    prompt, cached, preempted, waiting, kv = (
        _over_all([getattr(c, name) for c in known])
        for name in ("prompt_tokens", "cached_tokens", "preemptions", "waiting", "kv_usage"))
    prompts, hits = (sum(prompt) if prompt is not None else None), (sum(cached) if cached is not None else None)
    return ServerCache(
        server=server, prompt_tokens=prompts, cached_tokens=hits,
        hit_rate=hits / prompts if prompts and hits is not None else None,
        kv_usage=sum(kv) / len(kv) if kv else None, kv_usage_max=max(kv) if kv else None,
        preemptions=sum(preempted) if preempted is not None else None,
        waiting=sum(waiting) if waiting is not None else None)


def served_any_before(snapshot: object | None) -> bool | None:
    """Whether any replica had taken a prompt before ``snapshot`` (None: not known)."""
    if not isinstance(snapshot, ReplicaSnapshot):
        return None
    each = [served_before(s) for s in snapshot.each]
    if any(each):
        return True
    return None if any(v is None for v in each) else False


class ReplicaCaches:
    """Every replica's /metrics (one OpenAiCache each, the same headers), read together at each
    edge: engine/load/server_api.py's CacheStats over all of them. One URL: that server alone."""

    def __init__(self, urls: Sequence[str], headers: dict[str, str]) -> None:
        self.replicas = tuple(OpenAiCache(u, headers) for u in urls)

    async def snapshot(self, timeout_s: float) -> ReplicaSnapshot | None:
        got = await asyncio.gather(*(r.snapshot(timeout_s) for r in self.replicas))
        return ReplicaSnapshot(tuple(got)) if any(g is not None for g in got) else None

    async def reset(self, timeout_s: float) -> str | None:
        """Each replica's cache emptied; None when every one was, else why not (each named)."""
        whys = await asyncio.gather(*(r.reset(timeout_s) for r in self.replicas))
        if len(whys) == 1:
            return whys[0]
        said = [f"ep{i + 1}: {why}" for i, why in enumerate(whys) if why is not None]
        return "; ".join(said) or None

    def between(self, before: object | None, after: object | None) -> ServerCache | None:
        return combine(before, after)

    def served_before(self, snapshot: object | None) -> bool | None:
        return served_any_before(snapshot)
