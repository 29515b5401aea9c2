"""One line of plain text per event, for the event log and the headless progress lines.

Telemetry samples are not described: they arrive every second and belong to charts, not logs.
"""

from __future__ import annotations

from engine import events as ev
from engine import format as fmt
from engine.analysis.wire import carries, level_text


def _rate_unit(stream: ev.StreamStats | None) -> str:
    """A stream's rate counts requests (each many responses), as its tables say; else inferences."""
    return "req/s" if stream is not None else "infer/s"


def severity(event: ev.Event) -> str:
    """"error", "warning" or "info": how loudly a line should be shown."""
    if isinstance(event, ev.Error):
        return "error"
    if isinstance(event, ev.Warning):
        return "warning"
    if isinstance(event, ev.SessionEnded):
        return "info" if event.status == "ok" else "error"
    if isinstance(event, ev.BoxCheck):
        return {"no-go": "error", "warn": "warning"}.get(event.verdict, "info")
    if isinstance(event, ev.LevelResult):
        if event.remeasure:
            return "warning"
        return {"failed": "error", "unstable": "warning", "contended": "warning",
                "interrupted": "warning"}.get(event.status, "warning" if event.audit.client_bound else "info")
    if isinstance(event, ev.WindowResult) and event.errors:  # the client's verdict is the level's, not a window's
        return "warning"
    return "info"


def describe(event: ev.Event) -> str | None:
    """Human text for one event, or None for events that are not logged (telemetry)."""
    if isinstance(event, ev.SessionStarted):
        return f"session {event.session_id} started: profile {event.profile_name}, mode {event.mode}"
    if isinstance(event, ev.PhaseChanged):
        return f"{event.phase}" + (f": {event.detail}" if event.detail else "")
    if isinstance(event, ev.ServerReady):
        where = "embedded" if event.embedded else "remote"
        variant = f" ({event.config_variant})" if event.config_variant else ""
        version = f", Triton {event.triton_version}" if event.triton_version else ""
        mps = "" if event.mps is None else ", under MPS" if event.mps else ", without MPS"
        at = (f"{len(event.endpoints)} servers ({', '.join(event.endpoints)}), the load spread evenly"
              if event.endpoints else event.http_url)
        # the load's transport: an HTTP and a gRPC run of one server otherwise read the same
        over = f", load over {event.transport}" if event.transport else ""
        return f"server ready: {where} {event.model}{variant} at {at}{over}{version}{mps}"
    if isinstance(event, ev.ServerStopped):
        code = f" (exit {event.exit_code})" if event.exit_code is not None else ""
        return f"server stopped{code}" + (f": {event.reason}" if event.reason else "")
    if isinstance(event, ev.InputDataUsed):
        entries = f"{event.entries} entr{'y' if event.entries == 1 else 'ies'}"
        checked = ", outputs checked against its validation_data" if event.validated else ""
        return (f"input data: {event.path} ({entries}, {fmt.plural(event.requests, 'distinct request')}, "
                f"sha256 {event.sha256[:12]}{checked})")
    if isinstance(event, ev.LevelStarted):
        return (
            f"level {event.index + 1}/{event.total}: {event.mode} {fmt.level(event.mode, event.level)}, "
            f"batch {event.batch_size}, {event.workers} worker{'s' if event.workers != 1 else ''}"
            + (f", trial {event.trial}" if event.trial > 1 else "")
        )
    if isinstance(event, ev.WindowResult):
        tag = "warmup" if event.warmup else ("stable" if event.stable_so_far else "not yet stable")
        errors = f", {event.errors} errors" if event.errors else ""
        return (
            f"  window {event.index} ({tag}): {fmt.rate(event.throughput_ips)} {_rate_unit(event.stream)}, "
            f"p50 {fmt.ms(event.latency.p50)} ms, p99 {fmt.ms(event.latency.p99)} ms{errors}"
        )
    if isinstance(event, ev.LevelResult):
        return (
            f"level {fmt.level(event.mode, event.level)} {event.status}: "
            f"{fmt.rate(event.throughput_ips)} {_rate_unit(event.stream)}, p50 {fmt.ms(event.latency.p50)} / "
            f"p95 {fmt.ms(event.latency.p95)} / p99 {fmt.ms(event.latency.p99)} ms"
            + (f", {event.errors} errors" if event.errors else "")
            + (", client-bound" if event.audit.client_bound else "")
            + (f" (trial {event.trial})" if event.trial > 1 else "")
            + (f": measured again ({event.remeasure})" if event.remeasure else "")
        )
    if isinstance(event, ev.SweepFinished):
        sat = f", saturates at {event.saturation_level:g}" if event.saturation_level is not None else ""
        # degraded: an endpoint missing, or (merged hosts) measured at different times; each level's line says which
        degraded = f", {event.degraded} degraded (no decision rests on it)" if event.degraded else ""
        return (f"sweep finished: {fmt.plural(event.levels, 'level')}, {event.stable} stable, {event.failed} failed"
                f"{degraded}{sat}")
    if isinstance(event, ev.ProbeResult):
        eff = f", efficiency {fmt.percent(event.efficiency)}" if event.efficiency is not None else ""
        return (
            f"probe {event.model} {event.strategy} x{event.world_size} (batch {event.per_device_batch}, "
            f"{event.scaling}): {fmt.rate(event.samples_per_s.mean)} samples/s{eff}"
        )
    if isinstance(event, ev.AllReduceResult):
        peak = max((row.busbw_gbps for row in event.rows), default=None)
        return (
            f"all-reduce x{event.world_size} ({event.backend}, {event.device}): "
            f"peak busbw {fmt.ratio(peak, 1)} GB/s over {len(event.rows)} sizes"
        )
    if isinstance(event, ev.WireCeiling):
        at = f" (peak at {level_text(event.mode, event.peak_level)})" if event.peak_level is not None else ""
        return f"wire check: {carries(event)}{at}"
    if isinstance(event, ev.Topology):
        return f"topology: {event.summary or f'{len(event.gpus)} GPUs'}"
    if isinstance(event, ev.BoxCheck):
        counts = {s: sum(1 for i in event.items if i.status == s) for s in ("fail", "warn", "ok")}
        verdict = {"no-go": "NO-GO", "warn": "go, with warnings", "go": "GO"}.get(event.verdict, event.verdict)
        done = (f"box check ({event.reused}, not repeated)" if event.reused
                else f"box check done in {event.duration_s:.0f} s")
        return f"{done}: {verdict} ({', '.join(f'{n} {s}' for s, n in counts.items() if n)})"
    if isinstance(event, ev.Warning):
        return f"warning ({event.source}): {event.message}"
    if isinstance(event, ev.Error):
        return f"{'fatal ' if event.fatal else ''}error ({event.source}): {event.message}"
    if isinstance(event, ev.SessionEnded):
        error = f": {event.error}" if event.error else ""
        return f"session ended: {event.status} (exit {event.exit_code}){error}"
    return None
