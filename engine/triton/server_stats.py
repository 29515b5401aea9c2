"""Triton's statistics extension: cumulative counters per model, turned into per-interval deltas.

``GET /v2/models/<m>[/versions/<v>]/stats`` gives, per model version, cumulative {count, ns} for
success, queue, compute_input, compute_infer and compute_output, plus inference_count and
execution_count. The difference of two snapshots, divided by the request count, is the server's
average time per request over that interval. Note: the counters are the server's, so requests
from other clients of the same model during the interval are included.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from engine.analysis import sane_values
from engine.events import ServerBreakdown
from engine.net import http1
from engine.triton.target import Target

PARTS = ("success", "queue", "compute_input", "compute_infer", "compute_output")
# one model's statistics, every batch size's included, are tens of KB; several fetches may be in
# flight at once (one per window boundary), so each holds at most this much
STATS_MAX_BYTES = 4 << 20


@dataclass(frozen=True)
class StatsSnapshot:
    """Cumulative counters summed over the model's versions."""

    inference_count: int
    execution_count: int
    counts: dict[str, int]  # PARTS -> count
    ns: dict[str, int]  # PARTS -> total nanoseconds
    # when we asked and when the answer came (monotonic): the server read its counters in between
    asked_ns: int = 0
    answered_ns: int = 0
    # counters the server gave as something no counter can be (text, infinite, negative): named,
    # and their parts left out of the breakdown
    dropped: tuple[str, ...] = ()


def taken_in_time(snapshot: StatsSnapshot | None, boundary_ns: int, interval_ns: int) -> bool:
    """Whether ``snapshot`` was read close enough to ``boundary_ns`` to stand for it
    (sane_values.read_at_edge; pure). A snapshot without timing (built elsewhere) is taken as on time."""
    if snapshot is None or not snapshot.answered_ns:
        return True
    return sane_values.read_at_edge(snapshot.asked_ns, snapshot.answered_ns, boundary_ns, interval_ns)


def snapshot_from_json(doc: Any, model: str, version: str = "") -> StatsSnapshot | None:
    """Sum the matching model entries of a stats reply; None when the reply has none."""
    if not isinstance(doc, dict) or not isinstance(doc.get("model_stats"), list):
        return None
    entries = [
        e for e in doc["model_stats"]
        if isinstance(e, dict) and e.get("name") == model and (not version or str(e.get("version")) == version)
    ]
    if not entries:
        return None
    counts = dict.fromkeys(PARTS, 0)
    ns = dict.fromkeys(PARTS, 0)
    inference = execution = 0
    dropped: list[str] = []

    def read(table: Any, key: str, what: str) -> int:
        value = sane_values.counter(table.get(key, 0) if isinstance(table, dict) else None)
        if value is None:
            dropped.append(what)
            return 0
        return value

    for e in entries:
        inference += read(e, "inference_count", "inference_count")
        execution += read(e, "execution_count", "execution_count")
        stats = e.get("inference_stats") or {}
        for part in PARTS:
            item = (stats.get(part) or {}) if isinstance(stats, dict) else None
            counts[part] += read(item, "count", f"{part}.count")
            ns[part] += read(item, "ns", f"{part}.ns")
    return StatsSnapshot(inference, execution, counts, ns, dropped=tuple(dict.fromkeys(dropped)))


def breakdown(
    before: StatsSnapshot | None, after: StatsSnapshot | None, client_mean_s: float | None
) -> ServerBreakdown | None:
    """Per-request server times over the interval between two snapshots (pure)."""
    if before is None or after is None:
        return None
    dropped = list(dict.fromkeys([*before.dropped, *after.dropped]))
    unusable = {name.partition(".")[0] for name in dropped}
    requests = 0 if "success" in unusable else after.counts["success"] - before.counts["success"]
    counted = not {"inference_count", "execution_count"} & unusable
    inferences = after.inference_count - before.inference_count if counted else 0
    executions = after.execution_count - before.execution_count if counted else 0
    if requests < 0 or executions < 0:  # the server restarted in between
        return None

    def per_request(part: str) -> float | None:
        n = after.counts[part] - before.counts[part]
        if n <= 0 or part in unusable or "success" in unusable:
            return None
        value = (after.ns[part] - before.ns[part]) / n / 1e9
        sane = sane_values.server_time(value, client_mean_s)
        if sane is None:  # negative, or longer than the client's whole request: impossible
            dropped.append(f"{part} time")
        return sane

    total = per_request("success")
    return ServerBreakdown(
        request_count=requests,
        inference_count=inferences,
        execution_count=executions,
        queue=per_request("queue"),
        compute_input=per_request("compute_input"),
        compute_infer=per_request("compute_infer"),
        compute_output=per_request("compute_output"),
        server_total=total,
        avg_batch_size=inferences / executions if executions > 0 else None,
        client_minus_server=(client_mean_s - total) if client_mean_s is not None and total is not None else None,
        dropped=dropped,
    )


def ensemble_steps(config: dict[str, Any]) -> tuple[str, ...]:
    """The step models of an ensemble's configuration, in order; () for any other model (pure)."""
    if config.get("platform") != "ensemble":
        return ()
    scheduling = config.get("ensemble_scheduling")
    steps = scheduling.get("step") if isinstance(scheduling, dict) else None
    names = [s.get("model_name") for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []
    return tuple(n for n in names if isinstance(n, str) and n)


def ensemble_snapshot(top: StatsSnapshot | None, steps: list[StatsSnapshot | None]) -> StatsSnapshot | None:
    """An ensemble's counters as perf_analyzer reads them (pure): its own request count and total
    time, its steps' queue and compute times summed (each step runs once per request of a linear
    ensemble), and the first step's batches. Triton's own counters for an ensemble hold its steps'
    compute but not their queue time. A step without statistics: the ensemble's own counters."""
    if top is None or not steps or any(s is None for s in steps):
        return top
    found = [s for s in steps if s is not None]
    ns = {"success": top.ns["success"], **{part: sum(s.ns[part] for s in found) for part in PARTS[1:]}}
    counts = dict.fromkeys(PARTS, top.counts["success"])  # every part per request of the ensemble
    return StatsSnapshot(
        inference_count=found[0].inference_count, execution_count=found[0].execution_count, counts=counts, ns=ns,
        asked_ns=top.asked_ns, answered_ns=top.answered_ns,
        dropped=tuple(dict.fromkeys(name for s in (top, *found) for name in s.dropped)),
    )


async def fetch_snapshot(target: Target, timeout_s: float = 5.0) -> StatsSnapshot | None:
    """One snapshot, or None when the server cannot give it (stopped, extension disabled). For an
    ensemble (``target.composing``), its steps' statistics are read with it (ensemble_snapshot)."""
    asked = time.monotonic_ns()
    if target.composing:
        every = await asyncio.gather(_model_snapshot(target, target.model, target.model_version, timeout_s),
                                     *(_model_snapshot(target, step, "", timeout_s) for step in target.composing))
        found = ensemble_snapshot(every[0], list(every[1:]))
    else:
        found = await _model_snapshot(target, target.model, target.model_version, timeout_s)
    return dataclasses.replace(found, asked_ns=asked, answered_ns=time.monotonic_ns()) if found else None


async def _model_snapshot(target: Target, model: str, version: str, timeout_s: float) -> StatsSnapshot | None:
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/stats"
    try:
        reply = await http1.request(target.http_url, path, headers=target.headers, timeout_s=timeout_s,
                                    max_bytes=STATS_MAX_BYTES)
        if reply.status != 200:
            return None
        return snapshot_from_json(reply.json(), model, version)
    except (TimeoutError, OSError, http1.BadResponse, ValueError, RecursionError):
        return None


def summed(snapshots: list[StatsSnapshot | None]) -> StatsSnapshot | None:
    """Several servers' counters as one server's (pure): their sums, no timing; None when none
    is given. Their deltas give the breakdown over every request the servers served."""
    found = [s for s in snapshots if s is not None]
    if not found:
        return None
    return StatsSnapshot(
        inference_count=sum(s.inference_count for s in found),
        execution_count=sum(s.execution_count for s in found),
        counts={part: sum(s.counts[part] for s in found) for part in PARTS},
        ns={part: sum(s.ns[part] for s in found) for part in PARTS},
        dropped=tuple(dict.fromkeys(name for s in found for name in s.dropped)),
    )
