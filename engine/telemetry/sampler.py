"""The telemetry sampler the Session runs: one thread per source, events out.

The GPU sources are those the registry (engine/telemetry/registry.py) makes for this run's
settings; the host's CPU, memory and network are read beside them. Threads, not the event loop:
NVML calls block (PCIe throughput alone holds the caller for 20 ms per counter per GPU) and so
can an HTTP fetch of a remote /metrics. Each source has its own thread so that a slow one
cannot stretch another's interval.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from engine.errors import UserError
from engine.events import Event, GpuSample, HostSample
from engine.telemetry import registry
from engine.telemetry.gpu_source import GpuIdentity, GpuSource, SourceContext, TelemetrySettings
from engine.telemetry.host import HostReader
from engine.telemetry.once import WarnOnce
from engine.telemetry.triton_metrics import TRITON_GPU_REFRESH_S

STOP_BUDGET_S = 2.0
MIN_INTERVAL_S = 0.1  # below this NVML's own averaging windows make samples meaningless


class TelemetrySampler:
    def __init__(
        self,
        publish: Callable[[Event], None],
        *,
        nvml_interval_s: float = 1.0,
        host_interval_s: float = 1.0,
        metrics_url: str | None = None,
        metrics_headers: dict[str, str] | None = None,
        use_nvml: bool = True,
        metrics_interval_s: float = TRITON_GPU_REFRESH_S,  # the server's --metrics-interval-ms / 1000
        host_root_pid: int | None = None,
        host_server_port: int | None = None,  # a remote-mode server on this machine: its CPU apart from ours
        metrics_endpoints: tuple[tuple[str, str], ...] = (),  # several servers: (name, /metrics URL) each
    ) -> None:
        for name, value in (
            ("nvml_interval_s", nvml_interval_s),
            ("host_interval_s", host_interval_s),
            ("metrics_interval_s", metrics_interval_s),
        ):
            if not value >= MIN_INTERVAL_S:
                raise UserError(f"telemetry {name} must be at least {MIN_INTERVAL_S} s, got {value}")
        self._publish = publish
        self._warn = WarnOnce(publish)
        self.host_interval_s = host_interval_s
        self.settings = TelemetrySettings(
            nvml_interval_s=nvml_interval_s,
            use_nvml=use_nvml,
            metrics_url=metrics_url,
            metrics_headers=metrics_headers,
            metrics_interval_s=metrics_interval_s,
            metrics_endpoints=metrics_endpoints,
        )
        self._host_root_pid = host_root_pid
        self._host_server_port = host_server_port
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._latest_host: HostSample | None = None

    # ------------------------------------------------------------------ public API

    def start(self) -> None:
        if self._threads:
            raise RuntimeError("telemetry sampler already started")
        sources = registry.GPU_SOURCES.sources(self.settings)
        for source in sources:
            if not source.interval_s >= MIN_INTERVAL_S:
                raise UserError(f"telemetry source {source.name}: interval must be at least {MIN_INTERVAL_S} s, got {source.interval_s}")
        identity = GpuIdentity(sum(1 for s in sources if s.enumerates_gpus))
        targets: list[tuple[str, Callable[[], None]]] = [("telemetry-host", self._host_loop)]
        remote_gpus = bool(self.settings.metrics_url or self.settings.metrics_endpoints)
        for source in sources:
            warn = _NoDriverIsNoNews(self._warn) if remote_gpus and source.name == "nvml" else self._warn
            ctx = SourceContext(self._publish, warn, identity, self._stop)
            targets.append((f"telemetry-{source.name}", self._gpu_loop_of(source, ctx)))
        for name, target in targets:
            thread = threading.Thread(target=self._guarded(name, target), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        deadline = time.monotonic() + STOP_BUDGET_S
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def latest_host(self) -> HostSample | None:
        with self._lock:
            return self._latest_host

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    # ------------------------------------------------------------------ loops

    def _guarded(self, name: str, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except Exception as exc:  # telemetry must never take the run down with it
                self._warn(f"{name}-crashed", f"{name} stopped after an unexpected error ({exc!r}): its values are n/a")

        return run

    def _every(self, interval_s: float, tick: Callable[[float], None], key: str, *, last: bool = False) -> None:
        """Call tick(wall time) every interval on a fixed schedule until stopped. A tick that
        overruns skips the missed slots instead of bursting to catch up. ``last``: one more tick
        when stopped, so that cumulative counters (energy) are read after the run's last window."""
        next_t = time.monotonic() + interval_s
        while not self._stop.wait(max(0.0, next_t - time.monotonic())):
            self._tick(tick, key)
            next_t += interval_s
            now = time.monotonic()
            if next_t < now:
                next_t = now + interval_s
        if last:
            self._tick(tick, key)

    def _tick(self, tick: Callable[[float], None], key: str) -> None:
        try:
            tick(time.time())
        except Exception as exc:  # one bad sample is reported once; the next one is tried
            self._warn(key, f"telemetry {key} sample failed ({exc!r}); retrying each interval")

    def _host_loop(self) -> None:
        reader = HostReader(root_pid=self._host_root_pid, server_port=self._host_server_port)
        last_read = [time.time()]
        reader.read(last_read[0])  # baseline: the first interval starts now

        def tick(ts: float) -> None:
            if self._stop.is_set() and ts - last_read[0] < self.host_interval_s / 4:
                return  # the reading at stop: too short an interval to read CPU time over
            last_read[0] = ts
            sample = reader.read(ts)
            with self._lock:
                self._latest_host = sample
            self._publish(sample)

        # a last reading at stop: the run's final seconds (a short level's) are covered too
        self._every(self.host_interval_s, tick, "host", last=True)

    def _gpu_loop_of(self, source: GpuSource, ctx: SourceContext) -> Callable[[], None]:
        def tick(ts: float) -> None:
            readings = source.read()
            if readings is not None:
                self._publish(GpuSample(gpus=readings, source=source.name, interval_s=source.interval_s, ts=ts))

        def loop() -> None:
            try:
                try:
                    opened = source.open(ctx)
                finally:
                    if source.enumerates_gpus:
                        ctx.identity.opened()
                if not opened:
                    return
                if source.read_at_start:
                    self._tick(tick, source.name)
                self._every(source.interval_s, tick, source.name, last=source.read_at_stop)
            finally:
                source.close()

        return loop


NO_LOCAL_DRIVER = ("nvml-missing", "nvml-unavailable")


class _NoDriverIsNoNews(WarnOnce):
    """NVML's warnings where the GPUs are read from the server's /metrics: a machine with no
    NVIDIA driver at all (a laptop reaching a rented box) is no news, so that is not said; a
    driver that is there and fails still is."""

    def __init__(self, inner: WarnOnce) -> None:  # shares the sampler's once-only record
        self._inner = inner

    def __call__(self, key: str, message: str) -> bool:
        if key in NO_LOCAL_DRIVER and "no NVIDIA driver" in message:
            return False
        return self._inner(key, message)

    def rearm(self, key: str) -> None:
        self._inner.rearm(key)

    def active(self, key: str) -> bool:
        return self._inner.active(key)
