"""Telemetry against the real embedded Triton server (CPU build: no nv_gpu_* lines)."""

from __future__ import annotations

import time
import urllib.request

import psutil
import pytest

from engine.events import GpuSample, HostSample, Warning
from engine.telemetry.host import OwnProcesses
from engine.telemetry.prometheus import parse_prometheus_text
from engine.telemetry.sampler import TelemetrySampler
from engine.telemetry.triton_metrics import gpu_readings_from_metrics
from tests.engine.telemetry.test_sampler import Collector

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture
def server(identity_server):
    """The session's embedded identity server (tests/conftest.py)."""
    return identity_server


def test_real_metrics_page_parses_cleanly_and_has_no_gpu_values(server):
    with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
        text = response.read().decode()
    parsed = parse_prometheus_text(text)
    assert parsed.malformed == 0
    assert len(parsed.samples) > 0
    names = parsed.names()
    assert any(n.startswith("nv_inference_") for n in names), sorted(names)
    models = {s.labels.get("model") for s in parsed.samples if s.name.startswith("nv_inference_")}
    assert "identity" in models
    assert not any(n.startswith("nv_gpu_") for n in names)  # started with --allow-gpu-metrics=false on CPU
    assert gpu_readings_from_metrics(parsed) == []


def test_sampler_on_a_cpu_server_warns_once_and_keeps_sampling(server):
    got = Collector()
    sampler = TelemetrySampler(got, host_interval_s=0.2, metrics_url=server.metrics_url, use_nvml=False, metrics_interval_s=0.2)
    sampler.start()
    try:
        got.wait_for(HostSample, 4)
        time.sleep(0.5)  # a few more polls of /metrics
    finally:
        sampler.stop()
    assert [w.key for w in got.of(Warning)] == ["triton-metrics-no-gpu"]
    assert got.of(GpuSample) == []
    assert len(got.of(HostSample)) >= 4


def test_the_embedded_server_is_not_counted_as_our_own_cpu(server):
    tree = {p.pid for p in OwnProcesses()._tree()}
    names = {}
    for child in psutil.Process().children(recursive=True):
        try:
            names[child.pid] = child.name()
        except psutil.Error:
            continue
    triton = [pid for pid, name in names.items() if name == "tritonserver"]
    assert triton, f"no tritonserver among our children: {names}"
    assert not set(triton) & tree
    stubs = [pid for pid, name in names.items() if "stub" in name]  # Python-backend stubs under it
    assert stubs and not set(stubs) & tree
