"""Windows from ticks (pure functions): where a window ends, and what it holds.

A measurement window is a run of whole ticks, at least ``window_ms`` long, extended tick by
tick until it holds ``min_window_requests`` completions (perf_analyzer's time window with its
minimum request count) or until it reaches its longest allowed length.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.analysis.percentiles import concat_samples, latency_stats
from engine.events import SequenceStats, StreamStats
from engine.load.ticks import MESSAGES_PER_KIND, Tick


def window_end(
    completed: Sequence[int], start: int, available: int, min_ticks: int, max_ticks: int, min_requests: int
) -> int | None:
    """End tick (exclusive) of the window that starts at ``start``, or None if not decided yet.

    ``completed[k]`` is the number of requests that completed in tick k (all workers);
    ticks before ``available`` are complete."""
    if min_ticks < 1 or max_ticks < min_ticks:
        raise ValueError("need 1 <= min_ticks <= max_ticks")
    total = 0
    for k in range(start, min(available, len(completed))):
        total += completed[k]
        length = k + 1 - start
        if length >= min_ticks and (total >= min_requests or length >= max_ticks):
            return k + 1
    return None


@dataclass
class StreamSamples:
    """Per successful request of a streaming transport (the Tick's fields of the same names)."""

    ttft_ns: np.ndarray
    responses: np.ndarray
    decode_ns: np.ndarray
    itl_ns: np.ndarray
    tokens: np.ndarray  # output tokens per request
    reads: np.ndarray | None = None  # distinct arrival stamps per request (None: every gap measured)
    input_tokens: np.ndarray | None = None  # the prompt's tokens per request (-1: not known)
    worded: int = 0  # requests whose token counts are words, not the server's tokens
    cached_tokens: np.ndarray | None = None  # of the prompt's tokens, from the server's cache (-1: not known)


def stream_samples(parts: Sequence[StreamSamples | Tick | None]) -> StreamSamples | None:
    """The streaming samples of ticks or aggregates' samples together; None when none has any."""
    chosen = [p for p in parts if p is not None and p.responses is not None]
    if not chosen:
        return None
    return StreamSamples(
        ttft_ns=concat_samples(p.ttft_ns for p in chosen),  # type: ignore[misc]
        responses=concat_samples(p.responses for p in chosen),  # type: ignore[misc]
        decode_ns=concat_samples(p.decode_ns for p in chosen),  # type: ignore[misc]
        itl_ns=concat_samples(p.itl_ns for p in chosen),  # type: ignore[misc]
        tokens=concat_samples(p.tokens if p.tokens is not None else p.responses for p in chosen),  # type: ignore[misc]
        reads=concat_samples(p.reads if p.reads is not None else p.responses for p in chosen),  # type: ignore[misc]
        input_tokens=concat_samples(p.input_tokens if p.input_tokens is not None
                                    else np.full(len(p.responses), -1, dtype=np.int64) for p in chosen),  # type: ignore[arg-type]
        worded=sum(p.worded for p in chosen),
        cached_tokens=concat_samples(p.cached_tokens if p.cached_tokens is not None
                                     else np.full(len(p.responses), -1, dtype=np.int64) for p in chosen),  # type: ignore[arg-type]
    )


@dataclass
class Aggregate:
    """Everything the workers reported for a span of ticks (one window, or merged windows)."""

    start_tick: int
    end_tick: int  # exclusive
    duration_s: float
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    messages: dict[str, list[str]] = field(default_factory=dict)
    latency_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    uncorrected_ns: np.ndarray | None = None
    sent: int = 0
    late: int = 0
    cpu_ns: dict[int, int] = field(default_factory=dict)  # per worker
    wait_ns: dict[int, int] = field(default_factory=dict)  # per worker, where measured
    lag_ns: dict[int, np.ndarray] = field(default_factory=dict)  # per worker
    write_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    server_wait_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    client_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    stream: StreamSamples | None = None  # a streaming transport's samples; None: unary
    # a sequence model's: per successful request, 1 for a sequence's first step (aligned with
    # latency_ns), and the sequences ended; None: not a sequence model
    first_step: np.ndarray | None = None
    sequences: int = 0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def completed(self) -> int:
        return self.ok + self.error_count


def _merge_messages(into: dict[str, list[str]], more: dict[str, list[str]]) -> None:
    for kind, texts in more.items():
        kept = into.setdefault(kind, [])
        for text in texts:
            if len(kept) < MESSAGES_PER_KIND and text not in kept:
                kept.append(text)


def aggregate(ticks: Iterable[Tick], start_tick: int, end_tick: int, tick_ns: int, rate_mode: bool) -> Aggregate:
    """Sum the ticks ``start_tick <= k < end_tick`` of every worker."""
    chosen = [t for t in ticks if start_tick <= t.tick < end_tick]
    agg = Aggregate(start_tick, end_tick, (end_tick - start_tick) * tick_ns / 1e9)
    lat, unc, write, wait, client = [], [], [], [], []
    lags: dict[int, list[np.ndarray | array]] = {}
    for t in chosen:
        write.append(t.write_ns)
        wait.append(t.server_wait_ns)
        client.append(t.client_ns)
        agg.ok += t.ok
        for kind, n in t.errors.items():
            agg.errors[kind] = agg.errors.get(kind, 0) + n
        _merge_messages(agg.messages, t.messages)
        lat.append(t.latency_ns)
        if t.latency_uncorrected_ns is not None:
            unc.append(t.latency_uncorrected_ns)
        agg.sent += t.sent
        agg.late += t.late
        agg.cpu_ns[t.worker] = agg.cpu_ns.get(t.worker, 0) + t.cpu_ns
        if t.wait_ns is not None:
            agg.wait_ns[t.worker] = agg.wait_ns.get(t.worker, 0) + t.wait_ns
        lags.setdefault(t.worker, []).append(t.lag_ns)
    agg.latency_ns = concat_samples(lat)
    agg.uncorrected_ns = concat_samples(unc) if rate_mode else None
    agg.lag_ns = {w: concat_samples(parts) for w, parts in lags.items()}
    agg.write_ns, agg.server_wait_ns, agg.client_ns = concat_samples(write), concat_samples(wait), concat_samples(client)
    agg.stream = stream_samples(chosen)
    if any(t.first_step is not None for t in chosen):
        agg.first_step = concat_samples(t.first_step if t.first_step is not None else array("q", bytes(8 * t.ok))
                                        for t in chosen)
        agg.sequences = sum(t.sequences for t in chosen)
    return agg


def merge(parts: Sequence[Aggregate], rate_mode: bool) -> Aggregate:
    """One aggregate for several (not necessarily adjacent) spans: durations add up."""
    if not parts:
        raise ValueError("nothing to merge")
    out = Aggregate(parts[0].start_tick, parts[-1].end_tick, sum(p.duration_s for p in parts))
    for p in parts:
        out.ok += p.ok
        for kind, n in p.errors.items():
            out.errors[kind] = out.errors.get(kind, 0) + n
        _merge_messages(out.messages, p.messages)
        out.sent += p.sent
        out.late += p.late
        for w, ns in p.cpu_ns.items():
            out.cpu_ns[w] = out.cpu_ns.get(w, 0) + ns
        for w, ns in p.wait_ns.items():
            out.wait_ns[w] = out.wait_ns.get(w, 0) + ns
    out.latency_ns = concat_samples(p.latency_ns for p in parts)
    out.uncorrected_ns = concat_samples(p.uncorrected_ns for p in parts if p.uncorrected_ns is not None) if rate_mode else None
    workers = {w for p in parts for w in p.lag_ns}
    out.lag_ns = {w: concat_samples(p.lag_ns[w] for p in parts if w in p.lag_ns) for w in workers}
    out.write_ns = concat_samples(p.write_ns for p in parts)
    out.server_wait_ns = concat_samples(p.server_wait_ns for p in parts)
    out.client_ns = concat_samples(p.client_ns for p in parts)
    out.stream = stream_samples([p.stream for p in parts])
    if any(p.first_step is not None for p in parts):
        out.first_step = concat_samples(p.first_step if p.first_step is not None else np.zeros(p.ok, np.int64)
                                        for p in parts)
        out.sequences = sum(p.sequences for p in parts)
    return out


def sequence_stats(agg: Aggregate, dropped_kind: str) -> SequenceStats | None:
    """A sequence model's figures from windows (None for another model): the first steps'
    latency apart from the later steps', sequences ended per second, steps Triton refused
    because it had dropped their sequence (errors of ``dropped_kind``)."""
    first = agg.first_step
    if first is None:
        return None
    firsts = first.astype(bool)
    if firsts.size != agg.latency_ns.size:  # never expected: say not measured rather than misalign
        return None
    return SequenceStats(
        first_step=latency_stats(agg.latency_ns[firsts], histogram=True),
        later_steps=latency_stats(agg.latency_ns[~firsts], histogram=True),
        sequences_per_s=agg.sequences / agg.duration_s if agg.duration_s > 0 else 0.0,
        sequences=agg.sequences,
        dropped=agg.errors.get(dropped_kind, 0),
    )


def itl_unmeasurable(per_read: float) -> str:
    """Why a level's ITL is not measured: its responses came in reads of several."""
    return f"ITL not measurable: the client read {per_read:.0f} responses at once (client BOUND)"


def stream_stats(agg: Aggregate) -> StreamStats | None:
    """A streaming level's figures from its merged windows (None for a unary one): TTFT and ITL
    percentiles, responses and output tokens per request (a response is one token unless
    load.tokens_from names its count), output tokens/s overall and per request (the median of the
    tokens after the first response over the time from the first response to the final). Gaps
    between responses of one read are not measured; where they are most, ITL is not measured."""
    samples = agg.stream
    if samples is None or samples.responses.size == 0:
        return None
    responses = samples.responses.astype(np.float64)
    tokens = samples.tokens.astype(np.float64) if samples.tokens.size == responses.size else responses
    decode_s = samples.decode_ns.astype(np.float64) / 1e9
    rated = (decode_s > 0) & (responses > 0)
    # the first response's share of the tokens came before decode_s began
    per_request = tokens[rated] * (responses[rated] - 1) / responses[rated] / decode_s[rated]
    reads = samples.reads if samples.reads is not None and samples.reads.size == responses.size else samples.responses
    unmeasured = int((samples.responses - reads).sum())  # gaps between responses of one read
    itl_ns, note = samples.itl_ns, None
    if unmeasured > itl_ns.size:  # most gaps: what is left is the gaps between reads, not ITL
        itl_ns, note = itl_ns[:0], itl_unmeasurable(float(responses.sum()) / max(1, int(reads.sum())))
    inputs = samples.input_tokens
    known = inputs[inputs >= 0].astype(np.float64) if inputs is not None and inputs.size == responses.size else None
    input_known = known is not None and known.size == responses.size  # every request's prompt was counted
    return StreamStats(
        ttft=latency_stats(samples.ttft_ns, histogram=True),
        itl=latency_stats(itl_ns, histogram=True),
        itl_unmeasured=unmeasured,
        itl_note=note,
        responses_per_request=float(responses.mean()),
        output_tokens_per_s=float(tokens.sum()) / agg.duration_s if agg.duration_s > 0 else 0.0,
        tokens_per_s_per_request=float(np.median(per_request)) if per_request.size else None,
        tokens_per_request=float(tokens.mean()),
        input_tokens_per_request=float(known.mean()) if input_known and known is not None else None,
        input_tokens_per_s=(float(known.sum()) / agg.duration_s if input_known and known is not None
                            and agg.duration_s > 0 else None),
        tokens_are_words=samples.worded > 0,
        cached_tokens_per_request=_cached_mean(samples.cached_tokens, responses.size),
    )


def _cached_mean(cached: np.ndarray | None, requests: int) -> float | None:
    """The prompt tokens per request the server's usage said came from its cache, where it said so
    for every request; None where it did not (not measured)."""
    if cached is None or cached.size != requests or requests == 0 or bool((cached < 0).any()):
        return None
    return float(cached.astype(np.float64).mean())
