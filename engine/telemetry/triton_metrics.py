"""Remote GPUs through Triton's Prometheus endpoint (``/metrics``, port 8002 by default).

Triton refreshes its GPU gauges every ``--metrics-interval-ms`` (2000 ms by default), so the
poller is never asked to run faster than that: a faster poll would only repeat values and
pretend to a resolution the source does not have.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from http import HTTPStatus

from engine.analysis.sane_values import gauge
from engine.events import GpuReading, GpuSample
from engine.net import http1
from engine.profiles import redact_url
from engine.telemetry.gpu_source import GpuSource, SourceContext, TelemetrySettings
from engine.telemetry.once import WarnOnce
from engine.telemetry.prometheus import ParsedMetrics, parse_prometheus_text

TRITON_GPU_REFRESH_S = 2.0  # tritonserver --metrics-interval-ms default
FETCH_TIMEOUT_S = 1.5  # below the sampler's 2 s stop budget
IDENTITY_WAIT_S = 2.0  # how long the first poll waits for NVML to name the GPUs it shares
MAX_BODY_BYTES = 16 << 20  # a /metrics page with thousands of models is still far below this

# metric -> (GpuReading field, factor to our units)
GPU_GAUGES: dict[str, tuple[str, float]] = {
    "nv_gpu_utilization": ("util_gpu", 100.0),  # Triton: 0.0-1.0; ours: percent
    "nv_gpu_memory_used_bytes": ("mem_used", 1.0),
    "nv_gpu_memory_total_bytes": ("mem_total", 1.0),
    "nv_gpu_power_usage": ("power_w", 1.0),
    "nv_gpu_power_limit": ("power_limit_w", 1.0),
    "nv_energy_consumption": ("energy_j", 1.0),  # joules since Triton started
}
_INT_FIELDS = {"mem_used", "mem_total"}


class MetricsUnavailable(Exception):
    """The endpoint could not be read; the message is one line for a Warning."""


def gpu_readings_from_metrics(
    parsed: ParsedMetrics, identity: dict[str, tuple[int | None, str | None]] | None = None,
    dropped: list[str] | None = None,
) -> list[GpuReading]:
    """GpuReadings (source "triton") keyed by the ``gpu_uuid`` label, in first-seen order.
    ``identity`` (uuid -> index, name) fills what /metrics does not carry when the same GPUs
    are also visible locally through NVML."""
    identity = identity or {}
    readings: dict[str, GpuReading] = {}
    for sample in parsed.samples:
        target = GPU_GAUGES.get(sample.name)
        uuid = sample.labels.get("gpu_uuid")
        if target is None or not uuid:
            continue
        reading = readings.get(uuid)
        if reading is None:
            index, name = identity.get(uuid, (None, None))
            reading = readings[uuid] = GpuReading(uuid=uuid, index=index, source="triton", name=name)
        field_name, factor = target
        if math.isnan(sample.value):
            continue  # stays None: not available
        value = gauge(field_name, sample.value * factor)
        if value is None:  # infinite, negative or beyond any device: stays None, named in ``dropped``
            if dropped is not None:
                dropped.append(f"{sample.name}={sample.value:g}")
            continue
        setattr(reading, field_name, int(value) if field_name in _INT_FIELDS else value)
    return list(readings.values())


def fetch_metrics_text(url: str, headers: dict[str, str] | None = None, timeout: float = FETCH_TIMEOUT_S) -> str:
    try:
        reply = http1.request_blocking(url, headers={"Accept": "text/plain", **(headers or {})}, timeout_s=timeout,
                                       max_bytes=MAX_BODY_BYTES)
    except http1.ResponseTooLarge:
        raise MetricsUnavailable(f"response larger than {MAX_BODY_BYTES} bytes") from None
    except (ValueError, OSError, http1.BadResponse) as exc:  # ValueError: not an http(s) URL
        raise MetricsUnavailable(http1.describe_failure(exc)) from None
    if not 200 <= reply.status < 300:
        try:
            phrase = f" {HTTPStatus(reply.status).phrase}"
        except ValueError:  # a status HTTP does not name
            phrase = ""
        raise MetricsUnavailable(f"HTTP {reply.status}{phrase}")
    return reply.body.decode("utf-8", errors="replace")


class TritonGpuPoller:
    """One poll of /metrics -> a GpuSample, with degradation reported once per episode."""

    def __init__(
        self,
        url: str,
        warn: WarnOnce,
        *,
        headers: dict[str, str] | None = None,
        interval_s: float = TRITON_GPU_REFRESH_S,
        identity: Callable[[], dict[str, tuple[int | None, str | None]]] | None = None,
        fetch: Callable[[str, dict[str, str] | None], str] | None = None,
        label: str = "",
    ) -> None:
        self.url = url
        self.interval_s = interval_s
        self.label = label  # one of several servers: its GPUs are labelled "<label>:<n>"
        self._shown_url = redact_url(url)
        self._warn = warn
        self._headers = headers
        self._identity = identity or (lambda: {})
        self._fetch = fetch or (lambda u, h: fetch_metrics_text(u, h))
        self._known: list[GpuReading] = []  # last GPUs seen, to publish as n/a while unreachable
        self.dropped = 0  # values left out as impossible

    def poll(self, ts: float) -> GpuSample | None:
        readings = self.read()
        return GpuSample(gpus=readings, source="triton", interval_s=self.interval_s, ts=ts) if readings is not None else None

    def read(self) -> list[GpuReading] | None:
        """This poll's readings; None when there is nothing to publish."""
        try:
            text = self._fetch(self.url, self._headers)
        except MetricsUnavailable as exc:
            self._warn(
                f"triton-metrics-unreachable{self.label}",
                f"Triton metrics at {self._shown_url} unreachable ({exc}): remote GPU values are n/a until it answers",
            )
            if not self._known:
                return None
            return [GpuReading(uuid=r.uuid, index=r.index, source="triton", name=r.name, label=r.label)
                    for r in self._known]
        self._warn.rearm(f"triton-metrics-unreachable{self.label}")

        parsed = parse_prometheus_text(text, only=GPU_GAUGES)
        dropped: list[str] = []
        readings = gpu_readings_from_metrics(parsed, self._identity(), dropped)
        if dropped:
            self.dropped += len(dropped)
            self._warn(f"triton-metrics-impossible{self.label}", f"Triton metrics at {self._shown_url} hold impossible values "
                       f"({', '.join(dropped[:3])}): left out (n/a), never recorded")
        if not readings:
            self._warn(
                f"triton-metrics-no-gpu{self.label}",
                f"Triton metrics at {self._shown_url} have no nv_gpu_* values (CPU-only server, MIG, "
                "--allow-gpu-metrics=false, or another DCGM agent holds the GPUs): remote GPU values are n/a",
            )
            return None
        self._warn.rearm(f"triton-metrics-no-gpu{self.label}")
        present = parsed.names()
        for metric, (field_name, _) in GPU_GAUGES.items():
            if metric not in present:
                self._warn(
                    f"triton-metrics-missing:{metric}{self.label}",
                    f"Triton metrics at {self._shown_url} lack {metric}: {field_name} from Triton is n/a",
                )
        if self.label:  # unique across servers, even two that share a GPU
            for n, reading in enumerate(readings):
                reading.uuid, reading.label = f"{self.label}:{reading.uuid}", f"{self.label}:{n}"
        self._known = readings
        return readings


class TritonSource(GpuSource):
    """Triton's GPU gauges as a GpuSource. The GPUs NVML also sees get its index and name."""

    name = "triton"
    read_at_start = True  # gauges are absolute: the first poll is already a full sample

    def __init__(self, url: str, headers: dict[str, str] | None, interval_s: float,
                 endpoints: tuple[tuple[str, str], ...] = ()) -> None:
        # several servers: (label, URL) each, their GPUs in one sample; else url alone, unlabelled
        self.urls = list(endpoints) or [("", url)]
        self.url, self.headers, self.interval_s = url, headers, interval_s
        self._pollers: list[TritonGpuPoller] = []

    @classmethod
    def for_settings(cls, settings: TelemetrySettings) -> TritonSource | None:
        if settings.metrics_endpoints:
            return cls(settings.metrics_endpoints[0][1], settings.metrics_headers, settings.metrics_interval_s,
                       settings.metrics_endpoints)
        if not settings.metrics_url:
            return None
        return cls(settings.metrics_url, settings.metrics_headers, settings.metrics_interval_s)

    def open(self, ctx: SourceContext) -> bool:
        ctx.identity.wait(IDENTITY_WAIT_S, ctx.stop)
        if ctx.stop.is_set():
            return False
        self._pollers = [
            TritonGpuPoller(url, ctx.warn, headers=self.headers, interval_s=self.interval_s,
                            identity=ctx.identity.get, label=label)
            for label, url in self.urls
        ]
        return True

    def read(self) -> list[GpuReading] | None:
        found = [poller.read() for poller in self._pollers]
        if all(r is None for r in found):
            return None
        return [reading for readings in found if readings for reading in readings]
