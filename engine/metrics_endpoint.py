"""A live Prometheus endpoint: one subscriber on a source's bus, served over HTTP.

The bus calls `LiveMetrics` on the publisher's thread (the session's, never a load worker's): it
only copies a few numbers under a lock. `prometheus_client` renders them in the exposition format
on its own server thread, from a snapshot taken under the same lock at each scrape.

Names follow Prometheus's conventions: the unit in the name (seconds, bytes, watts, ratio),
``_total`` for counters, one family per figure with labels for the level, quantile and GPU.
"""

from __future__ import annotations

import copy
import errno
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine import events as ev
from engine.errors import UserError

PREFIX = "gpuscale"
QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.95", "p95"), ("0.99", "p99"))
SESSION_STATES = ("starting", "running", "ok", "failed", "interrupted")


@dataclass
class _Level:
    """One finished level: what its LevelResult said."""

    variant: str
    mode: str
    level: float
    stable: bool
    throughput_ips: float
    throughput_rps: float
    latency: ev.LatencyStats
    requests: int
    errors: int
    stream: ev.StreamStats | None = None  # a streaming model's TTFT, ITL and tokens/s


@dataclass
class Snapshot:
    """Everything the endpoint serves, as plain data (a copy is taken at each scrape)."""

    session_id: str = ""
    profile: str = ""
    model: str = ""
    variant: str = ""  # the study's config now running ("" outside a study)
    state: str = "starting"
    phase: str = ""
    mode: str = ""
    level: float | None = None
    level_index: int | None = None
    levels_planned: int | None = None
    window: ev.WindowResult | None = None
    windows_total: int = 0
    requests_total: int = 0
    errors_total: int = 0
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    levels: dict[tuple[str, str, float], _Level] = field(default_factory=dict)
    gpus: dict[tuple[str, str], ev.GpuReading] = field(default_factory=dict)  # (source, uuid)
    host: ev.HostSample | None = None
    last_event_ts: float | None = None


class LiveMetrics:
    """The bus subscriber: applies each event to a `Snapshot` under a lock and returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = Snapshot()

    def __call__(self, event: ev.Event) -> None:
        handler = _HANDLERS.get(type(event))
        with self._lock:
            self._state.last_event_ts = event.ts
            if handler is not None:
                handler(self._state, event)

    def snapshot(self) -> Snapshot:
        with self._lock:
            return copy.deepcopy(self._state)

    # prometheus_client's collector protocol: called on its server thread at each scrape
    def collect(self) -> Iterator[Any]:
        return iter(metric_families(self.snapshot()))


def _session_started(s: Snapshot, e: ev.SessionStarted) -> None:
    s.session_id, s.profile, s.state = e.session_id, e.profile_name, "running"
    model = e.profile.get("model") if isinstance(e.profile, dict) else None
    if isinstance(model, dict) and isinstance(model.get("name"), str):
        s.model = model["name"]


def _session_ended(s: Snapshot, e: ev.SessionEnded) -> None:
    if not s.variant:  # a study's state follows the study, not each config's session
        s.state = e.status if e.status in SESSION_STATES else "failed"
    s.level = s.level_index = None


def _phase(s: Snapshot, e: ev.PhaseChanged) -> None:
    s.phase = e.phase


def _level_started(s: Snapshot, e: ev.LevelStarted) -> None:
    s.mode, s.level, s.level_index, s.levels_planned = e.mode, e.level, e.index, e.total


def _window(s: Snapshot, e: ev.WindowResult) -> None:
    s.window = e
    s.windows_total += 1
    s.requests_total += e.requests
    s.errors_total += e.errors
    for kind, n in e.errors_by_kind.items():
        s.errors_by_kind[kind] = s.errors_by_kind.get(kind, 0) + n


def _level_result(s: Snapshot, e: ev.LevelResult) -> None:
    s.levels[(s.variant, e.mode, e.level)] = _Level(
        variant=s.variant, mode=e.mode, level=e.level, stable=e.status == "stable",
        throughput_ips=e.throughput_ips, throughput_rps=e.throughput_rps, latency=e.latency,
        requests=e.requests, errors=e.errors, stream=e.stream)


def _gpu_sample(s: Snapshot, e: ev.GpuSample) -> None:
    for reading in e.gpus:
        s.gpus[(reading.source or e.source, reading.uuid)] = reading


def _host_sample(s: Snapshot, e: ev.HostSample) -> None:
    s.host = e


def _study_started(s: Snapshot, e: ev.StudyStarted) -> None:
    s.session_id, s.model, s.state = e.study_id, e.model, "running"


def _variant_started(s: Snapshot, e: ev.StudyVariantStarted) -> None:
    s.variant = e.variant


def _study_finished(s: Snapshot, e: ev.StudyFinished) -> None:
    s.state = e.status if e.status in SESSION_STATES else "failed"
    s.level = s.level_index = None


_HANDLERS: dict[type, Callable[[Snapshot, Any], None]] = {
    ev.SessionStarted: _session_started,
    ev.SessionEnded: _session_ended,
    ev.PhaseChanged: _phase,
    ev.LevelStarted: _level_started,
    ev.WindowResult: _window,
    ev.LevelResult: _level_result,
    ev.GpuSample: _gpu_sample,
    ev.HostSample: _host_sample,
    ev.StudyStarted: _study_started,
    ev.StudyVariantStarted: _variant_started,
    ev.StudyFinished: _study_finished,
}


def _level_label(level: float) -> str:
    """1.0 -> "1", 12.5 -> "12.5": the level as people type it."""
    return str(int(level)) if float(level).is_integer() else repr(float(level))


def metric_families(s: Snapshot) -> list[Any]:
    """The snapshot as prometheus_client metric families (imported here: only a served run pays)."""
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        InfoMetricFamily,
        StateSetMetricFamily,
    )

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))

    out: list[Any] = []
    info = InfoMetricFamily(f"{PREFIX}_session", "The session (or study) being measured")
    info.add_metric([], {"session_id": s.session_id, "profile": s.profile, "model": s.model, "variant": s.variant})
    out.append(info)
    state = StateSetMetricFamily(f"{PREFIX}_session_state", "The session's state: running, then ok, failed or interrupted")
    state.add_metric([], {name: name == s.state for name in SESSION_STATES})
    out.append(state)
    phase = gauge("phase", "1 for the phase the session is in (box check, starting server, sweep, probe, ...)", ("phase",))
    if s.phase:
        phase.add_metric([s.phase], 1)
    out.append(phase)

    current = gauge("current_level", "The level being measured: requests in flight (concurrency) or requests/s (rate)", ("mode",))
    index = gauge("current_level_index", "0-based position of the level being measured in its sweep")
    planned = gauge("sweep_levels", "Levels in the sweep being run")
    if s.level is not None:
        current.add_metric([s.mode], s.level)
    if s.level_index is not None:
        index.add_metric([], s.level_index)
    if s.levels_planned is not None:
        planned.add_metric([], s.levels_planned)
    out += [current, index, planned]

    out += _window_families(s, gauge)
    out += _level_families(s, gauge)
    out += _gpu_families(s, gauge)
    out += _host_families(s, gauge)

    requests = CounterMetricFamily(f"{PREFIX}_requests", "Requests completed in every window (warmup included)")
    requests.add_metric([], s.requests_total)
    errors = CounterMetricFamily(f"{PREFIX}_request_errors", "Requests that failed, by kind", labels=["kind"])
    for kind, n in sorted(s.errors_by_kind.items()):
        errors.add_metric([kind], n)
    unkinded = s.errors_total - sum(s.errors_by_kind.values())
    if unkinded > 0:
        errors.add_metric(["other"], unkinded)
    windows = CounterMetricFamily(f"{PREFIX}_windows", "Measurement windows finished (warmup included)")
    windows.add_metric([], s.windows_total)
    out += [requests, errors, windows]
    if s.last_event_ts is not None:
        last = gauge("last_event_timestamp_seconds", "UNIX time of the last event the session published")
        last.add_metric([], s.last_event_ts)
        out.append(last)
    return out


Gauge = Callable[..., Any]


def _latency(family: Any, labels: list[str], stats: ev.LatencyStats) -> None:
    for quantile, attr in QUANTILES:
        value = getattr(stats, attr)
        if value is not None:
            family.add_metric([*labels, quantile], value)


def _window_families(s: Snapshot, gauge: Gauge) -> list[Any]:
    ips = gauge("window_throughput_inferences_per_second", "The last window's throughput: inferences (items) per second")
    rps = gauge("window_throughput_requests_per_second", "The last window's throughput: requests per second")
    lat = gauge("window_latency_seconds", "The last window's latency percentiles", ("quantile",))
    errors = gauge("window_errors", "Requests that failed in the last window")
    warmup = gauge("window_warmup", "1 while the last window was a warmup window (not measured)")
    end = gauge("window_end_timestamp_seconds", "UNIX time the last window ended")
    ttft, itl, tokens = _stream_families(gauge, "window", "The last window's", ())
    w = s.window
    if w is not None:
        ips.add_metric([], w.throughput_ips)
        rps.add_metric([], w.throughput_rps)
        _latency(lat, [], w.latency)
        errors.add_metric([], w.errors)
        warmup.add_metric([], 1 if w.warmup else 0)
        end.add_metric([], w.t_end)
        _stream(ttft, itl, tokens, [], w.stream)
    return [ips, rps, lat, errors, warmup, end, ttft, itl, tokens]


def _stream_families(gauge: Gauge, scope: str, whose: str, labels: tuple[str, ...]) -> tuple[Any, Any, Any]:
    """A streaming model's figures (served only while a level streams): time to the first
    response, the gaps between responses, output tokens/s."""
    return (gauge(f"{scope}_time_to_first_token_seconds", f"{whose} time to the first response (TTFT) percentiles",
                  (*labels, "quantile")),
            gauge(f"{scope}_inter_token_latency_seconds", f"{whose} gaps between responses (ITL) percentiles",
                  (*labels, "quantile")),
            gauge(f"{scope}_output_tokens_per_second", f"{whose} output tokens per second (a response is one token "
                  "unless load.tokens_from names its count)", labels))


def _stream(ttft: Any, itl: Any, tokens: Any, labels: list[str], stream: ev.StreamStats | None) -> None:
    if stream is None:
        return
    _latency(ttft, labels, stream.ttft)
    _latency(itl, labels, stream.itl)
    tokens.add_metric(labels, stream.output_tokens_per_s)


def _level_families(s: Snapshot, gauge: Gauge) -> list[Any]:
    from prometheus_client.core import CounterMetricFamily

    labels = ("variant", "mode", "level")
    ips = gauge("level_throughput_inferences_per_second", "A finished level's throughput: inferences per second", labels)
    rps = gauge("level_throughput_requests_per_second", "A finished level's throughput: requests per second", labels)
    lat = gauge("level_latency_seconds", "A finished level's latency percentiles (exact, stable windows)", (*labels, "quantile"))
    stable = gauge("level_stable", "1 when the level was stable (sound for a decision), 0 when not", labels)
    requests = CounterMetricFamily(f"{PREFIX}_level_requests", "A finished level's measured requests", labels=list(labels))
    errors = CounterMetricFamily(f"{PREFIX}_level_errors", "A finished level's failed requests", labels=list(labels))
    ttft, itl, tokens = _stream_families(gauge, "level", "A finished level's", labels)
    for level in s.levels.values():
        values = [level.variant, level.mode, _level_label(level.level)]
        ips.add_metric(values, level.throughput_ips)
        rps.add_metric(values, level.throughput_rps)
        _latency(lat, values, level.latency)
        stable.add_metric(values, 1 if level.stable else 0)
        requests.add_metric(values, level.requests)
        errors.add_metric(values, level.errors)
        _stream(ttft, itl, tokens, values, level.stream)
    return [ips, rps, lat, stable, requests, errors, ttft, itl, tokens]


def _gpu_families(s: Snapshot, gauge: Gauge) -> list[Any]:
    labels = ("gpu", "uuid", "name", "source")
    figures = (
        ("gpu_utilization_ratio", "GPU busy fraction (0-1)", "util_gpu", 0.01),
        ("gpu_memory_utilization_ratio", "GPU memory controller busy fraction (0-1)", "util_mem", 0.01),
        ("gpu_memory_used_bytes", "GPU memory in use", "mem_used", 1.0),
        ("gpu_memory_total_bytes", "GPU memory in all", "mem_total", 1.0),
        ("gpu_power_watts", "GPU power draw", "power_w", 1.0),
        ("gpu_power_limit_watts", "GPU power limit", "power_limit_w", 1.0),
        ("gpu_temperature_celsius", "GPU temperature", "temp_c", 1.0),
    )
    families = [(gauge(name, doc, labels), attr, scale) for name, doc, attr, scale in figures]
    for (source, uuid), reading in sorted(s.gpus.items(), key=lambda item: (item[1].index is None, item[1].index or 0, item[0])):
        values = ["" if reading.index is None else str(reading.index), uuid, reading.name or "", source]
        for family, attr, scale in families:
            value = getattr(reading, attr)
            if value is not None:
                family.add_metric(values, value * scale)
    return [family for family, _attr, _scale in families]


def _host_families(s: Snapshot, gauge: Gauge) -> list[Any]:
    cpu = gauge("host_cpu_utilization_ratio", "The host's CPU busy fraction, all cores (0-1)")
    cores = gauge("process_cpu_cores", "CPU in use by a party, in cores (1 = one full core): ours or the server's", ("party",))
    mem = gauge("host_memory_used_bytes", "The host's memory in use")
    h = s.host
    if h is not None:
        if h.cpu_percent is not None:
            cpu.add_metric([], h.cpu_percent / 100)
        for party, value in (("ours", h.own_cpu_percent), ("server", h.server_cpu_percent)):
            if value is not None:
                cores.add_metric([party], value / 100)
        if h.mem_used is not None:
            mem.add_metric([], h.mem_used)
    return [cpu, cores, mem]


class MetricsServer:
    """`LiveMetrics` served on ``bind:port`` (GET /metrics) from prometheus_client's own thread."""

    def __init__(self, metrics: LiveMetrics, port: int, bind: str = "127.0.0.1") -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        self.metrics = metrics
        registry = CollectorRegistry(auto_describe=False)
        registry.register(metrics)  # a Collector: its collect() is all the registry reads
        try:
            self._server, self._thread = start_http_server(port, addr=bind, registry=registry)
        except OSError as exc:
            why = "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
            raise UserError(f"--metrics-port {port}: cannot listen on {bind}:{port}: {why}") from None
        self.port = int(self._server.server_address[1])
        self.bind = bind

    @property
    def url(self) -> str:
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
