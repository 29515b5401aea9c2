"""The live Prometheus endpoint's figures: a synthetic session through `LiveMetrics`, served on
loopback by prometheus_client, read back with prometheus_client's own parser of the exposition
format. The events are test inputs (tests/tui/synthetic.py), not results."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine import events as ev
from engine.errors import UserError
from engine.metrics_endpoint import LiveMetrics, MetricsServer
from tests.tui.synthetic import session_events


def _scrape(server: MetricsServer) -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(server.url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def _value(samples: dict, metric: str, **labels: str) -> float:
    return samples[(metric, frozenset(labels.items()))]


@pytest.fixture
def served():
    metrics = LiveMetrics()
    server = MetricsServer(metrics, 0)
    yield metrics, server
    server.close()


def test_a_session_mid_sweep_serves_its_window_level_gpu_and_state(served) -> None:
    metrics, server = served
    events = session_events(n_gpus=2, levels=(1, 4, 8), finish_levels=2)
    for event in events:
        metrics(event)
    got = _scrape(server)
    windows = [e for e in events if isinstance(e, ev.WindowResult)]
    levels = [e for e in events if isinstance(e, ev.LevelResult)]
    last = windows[-1]

    assert _value(got, "gpuscale_session_state", gpuscale_session_state="running") == 1
    assert _value(got, "gpuscale_session_state", gpuscale_session_state="ok") == 0
    assert _value(got, "gpuscale_phase", phase="sweep") == 1
    assert _value(got, "gpuscale_current_level", mode="concurrency") == 8
    assert _value(got, "gpuscale_current_level_index") == 2
    assert _value(got, "gpuscale_sweep_levels") == 3

    assert _value(got, "gpuscale_window_throughput_inferences_per_second") == last.throughput_ips
    assert _value(got, "gpuscale_window_latency_seconds", quantile="0.99") == last.latency.p99
    assert _value(got, "gpuscale_window_latency_seconds", quantile="0.5") == last.latency.p50
    assert _value(got, "gpuscale_window_errors") == 0
    assert _value(got, "gpuscale_requests_total") == sum(w.requests for w in windows)
    assert _value(got, "gpuscale_windows_total") == len(windows)

    for level in levels:
        labels = {"variant": "", "mode": "concurrency", "level": str(int(level.level))}
        assert _value(got, "gpuscale_level_throughput_inferences_per_second", **labels) == level.throughput_ips
        assert _value(got, "gpuscale_level_latency_seconds", **labels, quantile="0.99") == level.latency.p99
        assert _value(got, "gpuscale_level_stable", **labels) == (1 if level.status == "stable" else 0)
        assert _value(got, "gpuscale_level_errors_total", **labels) == level.errors
    assert not any(name.startswith("gpuscale_level_") and ("level", "8") in labels for name, labels in got)

    reading = [e for e in events if isinstance(e, ev.GpuSample)][-1].gpus[1]
    gpu = {"gpu": "1", "uuid": reading.uuid, "name": reading.name, "source": "nvml"}
    assert _value(got, "gpuscale_gpu_utilization_ratio", **gpu) == pytest.approx(reading.util_gpu / 100)
    assert _value(got, "gpuscale_gpu_power_watts", **gpu) == reading.power_w
    assert _value(got, "gpuscale_gpu_memory_used_bytes", **gpu) == reading.mem_used
    host = [e for e in events if isinstance(e, ev.HostSample)][-1]
    assert _value(got, "gpuscale_process_cpu_cores", party="ours") == pytest.approx(host.own_cpu_percent / 100)


def test_the_end_of_a_session_is_its_state_and_no_level_is_current(served) -> None:
    metrics, server = served
    for event in session_events(n_gpus=1, levels=(1, 4), probe=False):
        metrics(event)
    metrics(ev.WindowResult(level=4, index=9, warmup=False, t_start=0, t_end=1, requests=10, errors=3,
                            throughput_rps=7, throughput_ips=7, latency=ev.LatencyStats(count=7),
                            errors_by_kind={"timeout": 2}))
    got = _scrape(server)
    assert _value(got, "gpuscale_session_state", gpuscale_session_state="ok") == 1
    assert _value(got, "gpuscale_session_state", gpuscale_session_state="running") == 0
    assert not any(name == "gpuscale_current_level" for name, _labels in got)
    assert _value(got, "gpuscale_request_errors_total", kind="timeout") == 2
    assert _value(got, "gpuscale_request_errors_total", kind="other") == 1
    assert not any(name == "gpuscale_window_latency_seconds" for name, _labels in got)  # no percentile: none served


def test_a_study_labels_each_level_with_its_config(served) -> None:
    metrics, server = served
    metrics(ev.StudyStarted(study_id="s1", model="vit_tiny", variants=["cpu", "cpu2"], levels=[1], mode="concurrency",
                            server="embedded"))
    for variant, ips in (("cpu", 100.0), ("cpu2", 180.0)):
        metrics(ev.StudyVariantStarted(variant=variant, position=0))
        metrics(ev.LevelResult(mode="concurrency", level=1, index=0, status="stable", batch_size=1, windows=3,
                               merged_windows=3, requests=10, errors=0, throughput_rps=ips, throughput_ips=ips,
                               latency=ev.LatencyStats(count=10, p99=0.01)))
        metrics(ev.SessionEnded(status="ok"))
    got = _scrape(server)
    assert _value(got, "gpuscale_session_state", gpuscale_session_state="running") == 1  # the study goes on
    for variant, ips in (("cpu", 100.0), ("cpu2", 180.0)):
        assert _value(got, "gpuscale_level_throughput_inferences_per_second",
                      variant=variant, mode="concurrency", level="1") == ips
    metrics(ev.StudyFinished(status="interrupted"))
    assert _value(_scrape(server), "gpuscale_session_state", gpuscale_session_state="interrupted") == 1


def test_a_port_in_use_is_a_user_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UserError, match=rf"--metrics-port {port}: cannot listen on 127.0.0.1:{port}: in use"):
            MetricsServer(LiveMetrics(), port)


def test_the_grafana_dashboard_reads_only_series_the_endpoint_serves(served) -> None:
    """docs/grafana/gpuscale_live.json: every metric its queries name is one the endpoint serves."""
    import json
    import re
    from pathlib import Path

    metrics, server = served
    for event in session_events(n_gpus=2, levels=(1, 4), finish_levels=1):
        metrics(event)
    metrics(ev.WindowResult(level=4, index=9, warmup=False, t_start=0, t_end=1, requests=10, errors=1,
                            throughput_rps=7, throughput_ips=7, latency=ev.LatencyStats(count=7, p50=0.1, p99=0.2),
                            stream=ev.StreamStats(ttft=ev.LatencyStats(count=7, p50=0.01, p99=0.02),
                                                  itl=ev.LatencyStats(count=49, p50=0.005, p99=0.01),
                                                  responses_per_request=8, output_tokens_per_s=56)))  # a streaming model's panels too
    served_names = {name for name, _labels in _scrape(server)}
    dashboard = json.loads((Path(__file__).resolve().parents[2] / "docs/grafana/gpuscale_live.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]] + [v["query"] for v in dashboard["templating"]["list"]]
    named = {m for q in queries for m in re.findall(r"gpuscale_\w+", q)}
    assert len(named) >= 12
    assert named <= served_names, named - served_names


def test_a_streaming_session_serves_ttft_itl_and_tokens(served) -> None:
    """A streaming model's windows and levels add time to first token, inter-token latency and
    output tokens/s; a unary session serves none of them (checked above by their absence)."""
    metrics, server = served
    stream = ev.StreamStats(ttft=ev.LatencyStats(count=10, p50=0.004, p99=0.0125),
                            itl=ev.LatencyStats(count=70, p50=0.0028, p99=0.0078),
                            responses_per_request=8, output_tokens_per_s=328.5)
    events = session_events(n_gpus=1, levels=(1, 4), finish_levels=2)
    for event in events:
        if isinstance(event, (ev.WindowResult, ev.LevelResult)):
            event.stream = stream
        metrics(event)
    got = _scrape(server)
    assert _value(got, "gpuscale_window_time_to_first_token_seconds", quantile="0.99") == 0.0125
    assert _value(got, "gpuscale_window_inter_token_latency_seconds", quantile="0.5") == 0.0028
    assert _value(got, "gpuscale_window_output_tokens_per_second") == 328.5
    labels = {"variant": "", "mode": "concurrency", "level": "4"}
    assert _value(got, "gpuscale_level_time_to_first_token_seconds", **labels, quantile="0.5") == 0.004
    assert _value(got, "gpuscale_level_inter_token_latency_seconds", **labels, quantile="0.99") == 0.0078
    assert _value(got, "gpuscale_level_output_tokens_per_second", **labels) == 328.5


def test_a_unary_session_serves_no_token_figures(served) -> None:
    metrics, server = served
    for event in session_events(n_gpus=1, levels=(1, 4), finish_levels=2):
        metrics(event)
    got = _scrape(server)
    assert not [name for name, _labels in got if "token" in name]
