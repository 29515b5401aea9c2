"""One rule for figures that add up: several parts of one whole (the hosts' windows of one
instant, the hosts' shares of an endpoint or of a level) as the whole's figures.

Each result type declares its additive fields (``ADDITIVE`` in engine/events.py: counts and
throughputs, which add because the parts cover the same instants); an optional one (a rate
mode's target rate) sums the parts that have it and is None where none has. Beside them, the
figures that combine by their own rule, where the type has them: the latency from the summed
histograms (engine/analysis/latency_merge.py), the client audits as one naming each part
(``merged_audit``), the errors by kind summed, the stream figures merged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.analysis.latency_merge import merged_latency
from engine.events import ClientAudit, StreamStats


def largest_known(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def summed_counts(dicts: Sequence[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for kind, n in d.items():
            out[kind] = out.get(kind, 0) + n
    return out


def merged_audit(audits: Sequence[tuple[str, ClientAudit]]) -> ClientAudit:
    """The hosts' self-audits as one, live on the head and in `merge` alike: client-bound when any
    host is, each reason naming its host; the CPU figures of the busiest host (the client-bound one
    first, then by its share of its own cores); the worst of each delay; sends and late sends summed."""
    if not audits:
        return ClientAudit()

    def busy(audit: ClientAudit) -> tuple[bool, float]:
        cpu = audit.cpu_percent or 0.0
        return audit.client_bound, cpu / audit.cpu_cores if audit.cpu_cores else cpu

    each = [a for _, a in audits]
    busiest = max(each, key=busy)
    reasons = [f"host {name}: {r}" for name, a in audits for r in a.reasons]
    return ClientAudit(
        cpu_percent=busiest.cpu_percent,
        cpu_cores=busiest.cpu_cores,
        loop_lag_p99=largest_known([a.loop_lag_p99 for a in each]),
        late_sends=sum(a.late_sends for a in each),
        sent=sum(a.sent for a in each),
        overhead_fraction=largest_known([a.overhead_fraction for a in each]),
        client_bound=any(a.client_bound for a in each) or bool(reasons),
        reasons=reasons,
        write_p50=largest_known([a.write_p50 for a in each]),
        write_p99=largest_known([a.write_p99 for a in each]),
        first_byte_p50=largest_known([a.first_byte_p50 for a in each]),
        client_delay_p50=largest_known([a.client_delay_p50 for a in each]),
        client_delay_p99=largest_known([a.client_delay_p99 for a in each]),
        client_delay_fraction=largest_known([a.client_delay_fraction for a in each]),
        cpu_wait_fraction=largest_known([a.cpu_wait_fraction for a in each]),
    )


def merged_stream(parts: Sequence[StreamStats | None]) -> StreamStats | None:
    """A streaming window's or level's figures over every host; the per-request median tokens/s
    does not merge and is left not available."""
    known = [p for p in parts if p is not None]
    if not known:
        return None
    requests = [p.ttft.count for p in known]
    total = sum(requests)
    unmeasured = sum(p.itl_unmeasured for p in known)
    measured = [p.itl for p in known if p.itl_note is None]
    note = next((p.itl_note for p in known if p.itl_note), None)
    if note is not None and unmeasured <= sum(s.count for s in measured):
        note = None  # the hosts that measured it outweigh the ones that could not
    inputs = [p.input_tokens_per_request for p in known if p.input_tokens_per_request is not None]
    input_rates = [p.input_tokens_per_s for p in known if p.input_tokens_per_s is not None]
    cached = [p.cached_tokens_per_request for p in known if p.cached_tokens_per_request is not None]
    return StreamStats(
        ttft=merged_latency([p.ttft for p in known]),
        itl=merged_latency(measured if note is None else []),
        itl_unmeasured=unmeasured,
        itl_note=note,
        responses_per_request=(sum(p.responses_per_request * n for p, n in zip(known, requests, strict=True)) / total
                               if total else 0.0),
        output_tokens_per_s=sum(p.output_tokens_per_s for p in known),
        tokens_per_s_per_request=None,
        # the prompts' tokens where every host counted them (OpenAI's usage), per request weighted by requests
        input_tokens_per_request=(sum(v * n for v, n in zip(inputs, requests, strict=True)) / total
                                  if total and len(inputs) == len(known) else None),
        input_tokens_per_s=sum(input_rates) if len(input_rates) == len(known) else None,
        tokens_are_words=any(p.tokens_are_words for p in known),
        cached_tokens_per_request=(sum(v * n for v, n in zip(cached, requests, strict=True)) / total
                                   if total and len(cached) == len(known) else None),
    )


def summed(parts: Sequence[Any], names: Sequence[str] = ()) -> dict[str, Any]:
    """The whole's figures as keyword arguments of its type (``type(parts[0])``). ``names``: the
    parts' names (hosts), which the merged audit's reasons carry; parts is not empty."""
    first = parts[0]
    out: dict[str, Any] = {}
    for name in type(first).ADDITIVE:
        known = [v for p in parts if (v := getattr(p, name)) is not None]
        out[name] = sum(known) if known else None
    if hasattr(first, "latency"):
        out["latency"] = merged_latency([p.latency for p in parts])
    if hasattr(first, "audit"):
        out["audit"] = merged_audit(list(zip(names or [""] * len(parts), [p.audit for p in parts], strict=True)))
    if hasattr(first, "errors_by_kind"):
        out["errors_by_kind"] = summed_counts([p.errors_by_kind for p in parts])
    if hasattr(first, "stream"):
        out["stream"] = merged_stream([p.stream for p in parts])
    return out
