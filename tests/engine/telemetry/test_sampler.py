"""TelemetrySampler end to end on this GPU-less machine: real pynvml (no driver), real psutil,
a real HTTP /metrics endpoint."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from engine import libnvml
from engine.errors import UserError
from engine.events import Event, GpuSample, HostSample, Topology, Warning
from engine.telemetry.nvml_gpus import NvmlGpus
from engine.telemetry.once import WarnOnce
from engine.telemetry.sampler import TelemetrySampler
from tests.engine.telemetry.conftest import TRITON_GPU_METRICS


class Collector:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, cls: type) -> list:
        with self._lock:
            return [e for e in self.events if isinstance(e, cls)]

    def wait_for(self, cls: type, n: int, timeout: float = 10.0) -> list:
        deadline = time.monotonic() + timeout
        while len(self.of(cls)) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.of(cls)


def _run(sampler: TelemetrySampler, until: callable) -> None:
    sampler.start()
    try:
        until()
    finally:
        t0 = time.monotonic()
        sampler.stop()
        assert time.monotonic() - t0 < 2.5
        assert not sampler.running


def test_real_pynvml_without_a_driver_is_one_warning():
    events: list[Warning] = []
    assert NvmlGpus(WarnOnce(events.append)).open() is False
    assert len(events) == 1 and events[0].key == "nvml-unavailable"
    assert "no NVIDIA driver" in events[0].message


def test_pynvml_not_installed_is_one_warning(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    events: list[Warning] = []
    assert NvmlGpus(WarnOnce(events.append)).open() is False
    assert [e.key for e in events] == ["nvml-missing"]


@pytest.mark.slow
def test_without_gpus_the_host_samples_flow_and_nvml_warns_once():
    got = Collector()
    sampler = TelemetrySampler(got, nvml_interval_s=0.1, host_interval_s=0.2)
    _run(sampler, lambda: got.wait_for(HostSample, 3))
    hosts = got.of(HostSample)
    assert len(hosts) >= 3
    assert all(h.cpu_percent is not None and h.own_cpu_percent is not None for h in hosts)
    assert sampler.latest_host() is hosts[-1]
    assert got.of(GpuSample) == [] and got.of(Topology) == []
    assert [w.key for w in got.of(Warning)] == ["nvml-unavailable"]
    stamps = [h.ts for h in hosts]
    assert stamps == sorted(stamps)


@pytest.mark.slow
def test_triton_metrics_are_polled_no_faster_than_the_source_refreshes(metrics_server):
    metrics_server.body = TRITON_GPU_METRICS
    got = Collector()
    sampler = TelemetrySampler(
        got, host_interval_s=5.0, metrics_url=metrics_server.url, use_nvml=False, metrics_interval_s=0.25,
        metrics_headers={"X-Token": "abc"},
    )
    t0 = time.monotonic()
    _run(sampler, lambda: got.wait_for(GpuSample, 4))
    elapsed = time.monotonic() - t0
    samples = got.of(GpuSample)
    assert len(samples) >= 4
    assert all(s.source == "triton" and s.interval_s == 0.25 for s in samples)
    assert all(g.source == "triton" for s in samples for g in s.gpus)
    assert samples[0].gpus[0].util_gpu == pytest.approx(87.0)
    # one fetch at start, then one per interval: never more often than the gauges change
    assert len(metrics_server.requests) <= 1 + elapsed / 0.25 + 1
    assert metrics_server.requests[0]["X-Token"] == "abc"
    assert got.of(Warning) == []


@pytest.mark.slow
def test_unreachable_metrics_url_warns_once_and_stop_is_prompt(closed_port_url):
    got = Collector()
    sampler = TelemetrySampler(got, host_interval_s=0.2, metrics_url=closed_port_url, use_nvml=False, metrics_interval_s=0.1)
    _run(sampler, lambda: (got.wait_for(HostSample, 3), time.sleep(0.5)))
    assert [w.key for w in got.of(Warning)] == ["triton-metrics-unreachable"]
    assert got.of(GpuSample) == []


def test_a_consumer_that_raises_does_not_stop_sampling():
    seen: list[Event] = []

    def flaky(event: Event) -> None:
        seen.append(event)
        if isinstance(event, HostSample) and len(seen) < 3:
            raise RuntimeError("consumer bug")

    def until() -> None:
        deadline = time.monotonic() + 120  # a bound on a hang: the loop ends at the 4th sample
        while sum(isinstance(e, HostSample) for e in seen) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)

    _run(TelemetrySampler(flaky, host_interval_s=0.1, use_nvml=False), until)
    assert sum(isinstance(e, HostSample) for e in seen) >= 4
    assert any(isinstance(e, Warning) and "host" in e.key for e in seen)


@pytest.mark.parametrize("kw", [{"nvml_interval_s": 0}, {"host_interval_s": -1}, {"metrics_interval_s": 0.01}])
def test_bad_intervals_are_user_errors(kw):
    with pytest.raises(UserError) as info:
        TelemetrySampler(lambda e: None, **kw)
    assert "\n" not in str(info.value)


def test_nvml_is_read_once_more_at_stop():
    # the energy per image of a run's last level needs a counter reading after its last window:
    # the sampler reads NVML once more when stopped, however far the next tick was
    from tests.engine.telemetry.fake_nvml import FakeGpu, FakeNvml

    got = Collector()
    sampler = TelemetrySampler(got, nvml_interval_s=30.0, host_interval_s=30.0)
    with libnvml.stand_in(FakeNvml([FakeGpu(0, "GPU-0")])):
        _run(sampler, lambda: got.wait_for(Topology, 1))
    assert got.of(Topology), got.events
    (sample,) = got.of(GpuSample)
    assert sample.gpus[0].energy_j is not None


def test_triton_readings_take_index_and_name_from_nvml(metrics_server):
    # the same GPU seen by both sources: /metrics names it by UUID only, NVML enumerates it
    from tests.engine.telemetry.fake_nvml import FakeGpu, FakeNvml

    metrics_server.body = TRITON_GPU_METRICS
    uuid = "GPU-c06bbf33-c250-ca45-579b-19134b518844"
    got = Collector()
    sampler = TelemetrySampler(got, nvml_interval_s=0.2, host_interval_s=5.0, metrics_url=metrics_server.url,
                               metrics_interval_s=0.2)
    with libnvml.stand_in(FakeNvml([FakeGpu(0, uuid, name="local H200")])):
        _run(sampler, lambda: [s for s in got.wait_for(GpuSample, 4) if s.source == "triton"])
    triton = [s for s in got.of(GpuSample) if s.source == "triton"]
    nvml = [s for s in got.of(GpuSample) if s.source == "nvml"]
    assert triton and nvml
    named = {g.uuid: (g.index, g.name) for g in triton[0].gpus}
    assert named[uuid] == (0, "local H200")  # the first poll already knew it
    assert named["GPU-7f1e2d3c-0000-1111-2222-333344445555"] == (None, None)  # not local


@pytest.mark.slow
def test_with_the_servers_metrics_a_machine_without_a_driver_is_not_warned_about():
    """A laptop reaching a rented box reads the GPUs from the server's /metrics: that it has no
    NVIDIA driver of its own is no news (the metrics URL here answers nothing: its own warnings
    are another matter)."""
    got = Collector()
    sampler = TelemetrySampler(got, nvml_interval_s=0.1, host_interval_s=0.2, metrics_url="http://127.0.0.1:9/metrics")
    _run(sampler, lambda: got.wait_for(HostSample, 3))
    assert "nvml-unavailable" not in [w.key for w in got.of(Warning)]


def test_stopping_reads_the_host_once_more_over_the_seconds_since_the_last_sample():
    """A level shorter than the host interval ends before the next tick: the reading at stop
    covers it, and says how many seconds it covers."""
    got = Collector()
    sampler = TelemetrySampler(got, use_nvml=False, host_interval_s=5.0)
    _run(sampler, lambda: time.sleep(1.6))  # well under one interval, over a quarter of it
    (host,) = got.of(HostSample)
    assert host.interval_s is not None and host.interval_s >= 1.6
    assert host.cpu_percent is not None
