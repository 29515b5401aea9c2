"""Remote GPUs from Triton's /metrics: parsing into GpuReadings and the poller's degradation."""

from __future__ import annotations

import pytest

from engine.events import Warning
from engine.telemetry.once import WarnOnce
from engine.telemetry.prometheus import parse_prometheus_text
from engine.telemetry.triton_metrics import TritonGpuPoller, gpu_readings_from_metrics
from tests.engine.telemetry.conftest import TRITON_GPU_METRICS

UUID0 = "GPU-c06bbf33-c250-ca45-579b-19134b518844"
UUID1 = "GPU-7f1e2d3c-0000-1111-2222-333344445555"


def test_documented_gpu_metrics_become_readings_in_our_units():
    r0, r1 = gpu_readings_from_metrics(parse_prometheus_text(TRITON_GPU_METRICS))
    assert (r0.uuid, r0.source, r0.index, r0.name) == (UUID0, "triton", None, None)
    assert r0.util_gpu == pytest.approx(87.0)  # 0.0-1.0 -> percent
    assert (r0.mem_used, r0.mem_total) == (33763098624, 42949672960)
    assert isinstance(r0.mem_used, int)
    assert (r0.power_w, r0.power_limit_w, r0.energy_j) == (251.091, 400.0, 3594017.4)
    assert r1.util_gpu == 0.0 and r1.power_w == 51.5  # a real zero stays zero
    # what Triton does not export stays "not available"
    assert (r0.temp_c, r0.sm_clock_mhz, r0.pcie_tx_bps, r0.nvlink_tx_bps, r0.util_mem) == (None,) * 5


def test_identity_from_nvml_fills_index_and_name():
    readings = gpu_readings_from_metrics(parse_prometheus_text(TRITON_GPU_METRICS), {UUID1: (3, "NVIDIA H200")})
    assert (readings[1].index, readings[1].name) == (3, "NVIDIA H200")
    assert (readings[0].index, readings[0].name) == (None, None)


def test_nan_gauge_is_not_available():
    text = f'nv_gpu_utilization{{gpu_uuid="{UUID0}"}} NaN\nnv_gpu_power_usage{{gpu_uuid="{UUID0}"}} 10\n'
    (r,) = gpu_readings_from_metrics(parse_prometheus_text(text))
    assert r.util_gpu is None and r.power_w == 10.0


def _poller(url: str, events: list, **kw) -> TritonGpuPoller:
    return TritonGpuPoller(url, WarnOnce(events.append), interval_s=2.0, **kw)


def test_poller_reads_a_real_endpoint_and_sends_headers(metrics_server):
    metrics_server.body = TRITON_GPU_METRICS
    events: list[Warning] = []
    poller = _poller(metrics_server.url, events, headers={"Authorization": "Bearer t0ken"})
    sample = poller.poll(ts=10.0)
    assert sample is not None and sample.source == "triton" and sample.interval_s == 2.0 and sample.ts == 10.0
    assert [g.uuid for g in sample.gpus] == [UUID0, UUID1]
    assert metrics_server.requests[0]["Authorization"] == "Bearer t0ken"
    assert events == []


def test_unreachable_is_one_warning_per_episode_and_known_gpus_turn_na(metrics_server, closed_port_url):
    metrics_server.body = TRITON_GPU_METRICS
    events: list[Warning] = []
    urls = {"now": metrics_server.url}
    from engine.telemetry.triton_metrics import fetch_metrics_text

    poller = _poller("http://user:secret@remote:8002/metrics", events, fetch=lambda u, h: fetch_metrics_text(urls["now"], h))
    assert poller.poll(1.0) is not None
    urls["now"] = closed_port_url
    for ts in (2.0, 3.0, 4.0):
        sample = poller.poll(ts)
        assert sample is not None and [g.uuid for g in sample.gpus] == [UUID0, UUID1]
        assert all(g.util_gpu is None and g.mem_used is None and g.power_w is None for g in sample.gpus)
    assert len(events) == 1 and events[0].key == "triton-metrics-unreachable"
    assert "secret" not in events[0].message  # credentials never reach an event
    urls["now"] = metrics_server.url
    assert poller.poll(5.0).gpus[0].util_gpu == pytest.approx(87.0)
    urls["now"] = closed_port_url
    poller.poll(6.0)
    assert len(events) == 2  # a new outage is news again


def test_never_reachable_gives_no_sample_and_one_warning(closed_port_url):
    events: list[Warning] = []
    poller = _poller(closed_port_url, events)
    assert [poller.poll(float(t)) for t in range(3)] == [None, None, None]
    assert len(events) == 1 and "unreachable" in events[0].message


def test_http_error_status_is_unreachable(metrics_server):
    metrics_server.status = 503
    events: list[Warning] = []
    assert _poller(metrics_server.url, events).poll(1.0) is None
    assert len(events) == 1 and "HTTP 503" in events[0].message


def test_server_without_gpu_metrics_is_one_warning(metrics_server):
    metrics_server.body = 'nv_inference_request_success{model="identity",version="1"} 5\n'
    events: list[Warning] = []
    poller = _poller(metrics_server.url, events)
    assert [poller.poll(float(t)) for t in range(3)] == [None, None, None]
    assert [e.key for e in events] == ["triton-metrics-no-gpu"]
    assert "nv_gpu_*" in events[0].message


def test_missing_gauge_is_none_with_one_warning(metrics_server):
    metrics_server.body = "\n".join(
        line for line in TRITON_GPU_METRICS.splitlines() if not line.startswith("nv_gpu_power_limit")
    )
    events: list[Warning] = []
    poller = _poller(metrics_server.url, events)
    for t in range(3):
        sample = poller.poll(float(t))
        assert all(g.power_limit_w is None and g.power_w is not None for g in sample.gpus)
    assert [e.key for e in events] == ["triton-metrics-missing:nv_gpu_power_limit"]


def test_several_servers_gpus_in_one_sample_labelled_by_endpoint(metrics_server, closed_port_url):
    import threading

    from engine.telemetry.gpu_source import GpuIdentity, SourceContext, TelemetrySettings
    from engine.telemetry.triton_metrics import TritonSource

    metrics_server.body = TRITON_GPU_METRICS
    events: list[Warning] = []
    # two servers sharing one box's GPUs (the same /metrics), and a third that does not answer
    settings = TelemetrySettings(1.0, False, None, None, 2.0, metrics_endpoints=(
        ("ep1", metrics_server.url), ("ep2", metrics_server.url), ("ep3", closed_port_url)))
    source = TritonSource.for_settings(settings)
    assert source is not None
    assert source.open(SourceContext(events.append, WarnOnce(events.append), GpuIdentity(0), threading.Event()))
    readings = source.read()
    assert readings is not None
    assert [g.label for g in readings] == ["ep1:0", "ep1:1", "ep2:0", "ep2:1"]
    assert [g.uuid for g in readings] == [f"ep1:{UUID0}", f"ep1:{UUID1}", f"ep2:{UUID0}", f"ep2:{UUID1}"]
    assert len(events) == 1 and closed_port_url in events[0].message
