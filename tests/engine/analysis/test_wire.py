"""The wire's ceiling, pure parts: the wire's payload, what the model's instances would do by
Triton's compute times, the request-path verdict and its line in the report (engine/analysis/wire.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.analysis.bottleneck import Verdict, diagnose
from engine.analysis.saturation import saturation_point
from engine.analysis.wire import (
    assess,
    instance_capacity,
    model_instances,
    request_path_line,
    wire_ceiling,
    wire_elements,
    wire_is_the_limit,
)
from engine.events import (
    ClientAudit,
    LatencyStats,
    LevelResult,
    ServerBreakdown,
    ServerReady,
    SessionEnded,
    WireCeiling,
    WireLevel,
)
from engine.format import body_size
from engine.record.doc import to_markdown
from engine.record.findings import analyze, recommend
from engine.record.reader import Recording
from engine.record.recording_report import build_report
from engine.record.summary import summarize
from tests.engine.analysis.test_bottleneck import ev, sweep
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.structs import replace

VIT_ITEM = 3 * 224 * 224 * 4  # 602,112 bytes


def result(level: float, ips: float, status: str = "stable", client_bound: bool = False,
           server: ServerBreakdown | None = None, requests: int = 100) -> LevelResult:
    return LevelResult(mode="concurrency", level=level, index=0, status=status, batch_size=1, windows=3,
                       merged_windows=3, requests=requests, errors=0, throughput_rps=ips, throughput_ips=ips,
                       latency=LatencyStats(count=requests, mean=0.01, p50=0.009, p99=0.02), server=server,
                       audit=ClientAudit(client_bound=client_bound))


def wire(peak: float = 10_100.0, saturated: bool = True, client_bound: bool = False,
         transport: str = "http") -> WireCeiling:
    return WireCeiling(model="openclip_vit_b32", transport=transport, batch_size=1, bytes_per_item=VIT_ITEM,
                       request_bytes=VIT_ITEM, input_shape=[150_528], peak_ips=peak, peak_level=64,
                       peak_client_bound=client_bound, saturated=saturated,
                       levels=[WireLevel(level=64, status="stable", throughput_ips=peak, throughput_rps=peak)])


def test_the_wire_carries_the_models_bytes_as_fp32() -> None:
    assert wire_elements(VIT_ITEM) == 150_528
    assert wire_elements(5) == 2 and wire_elements(0) == 1  # never fewer bytes than the model's
    assert body_size(VIT_ITEM) == "602 KB" and body_size(64) == "64 B" and body_size(4_816_896) == "4.82 MB"


@pytest.mark.parametrize("config, gpus, expected", [
    ({"instance_group": [{"kind": "KIND_GPU", "count": 3, "gpus": [0]}]}, None, 3),
    ({"instance_group": [{"kind": "KIND_GPU", "count": 3, "gpus": [0, 1, 2, 3]}]}, None, 12),
    ({"instance_group": [{"kind": "KIND_GPU", "count": 2, "gpus": [0]},
                         {"kind": "KIND_GPU", "count": 1, "gpus": [1, 2]}]}, None, 4),
    ({"instance_group": [{"kind": "KIND_CPU", "count": 4}]}, None, 4),
    ({"instance_group": [{"kind": "KIND_GPU", "count": 2}]}, 4, 8),  # no gpus listed: the config's GPUs
    ({"instance_group": [{"kind": "KIND_GPU", "count": 2}]}, None, None),
    ({"instance_group": [{"kind": "KIND_CPU", "count": "many"}]}, None, None),
    ({}, 4, None),
])
def test_model_instances_from_the_config(config, gpus, expected) -> None:
    assert model_instances(config, gpus) == expected


def test_capacity_is_instances_times_batch_over_the_execution_time() -> None:
    server = ServerBreakdown(request_count=100, inference_count=1600, execution_count=100, compute_infer=0.020,
                             avg_batch_size=16.0)
    cap = instance_capacity(12, server, 64)
    assert cap is not None and cap.images_per_s == pytest.approx(12 * 16 / 0.020)
    assert "12 instances would do 9,600 images/s (from Triton's compute times" in cap.describe()
    assert instance_capacity(None, server, 64) is None
    assert instance_capacity(12, replace(server, compute_infer=None), 64) is None
    assert instance_capacity(12, None, 64) is None


def test_wire_ceiling_from_level_results() -> None:
    results = [result(64, 10_000.0), result(1, 900.0), result(16, 9_800.0), result(256, 20_000.0, status="failed"),
               result(128, 10_050.0, client_bound=True)]
    w = wire_ceiling("vit", "system_shm", 2, VIT_ITEM, False, results)
    assert [lv.level for lv in w.levels] == [1, 16, 64, 128, 256]  # by level
    assert w.request_bytes == 2 * VIT_ITEM and w.input_shape == [150_528]
    assert (w.peak_ips, w.peak_level, w.peak_client_bound) == (10_050.0, 128, True)  # failed levels are no peak
    assert w.saturated  # 16 is within 5 % of 64 (the client-bound level is left out)
    rising = wire_ceiling("vit", "http", 1, VIT_ITEM, False, [result(1, 100.0), result(4, 400.0)])
    assert not rising.saturated


def test_the_limit_needs_a_real_ceiling_and_a_close_model_peak() -> None:
    assert wire_is_the_limit(8_600.0, wire())  # 85 % of 10.1k
    assert not wire_is_the_limit(6_000.0, wire())
    assert not wire_is_the_limit(9_900.0, wire(saturated=False))  # a lower bound is no ceiling
    assert not wire_is_the_limit(9_900.0, wire(client_bound=True))
    assert not wire_is_the_limit(None, wire())


def test_the_line_says_it_with_numbers() -> None:
    server = ServerBreakdown(request_count=100, inference_count=1600, execution_count=100, compute_infer=0.020,
                             avg_batch_size=16.0)
    cap = instance_capacity(12, server, 64)
    line = request_path_line(wire(), 9_500.0, cap)
    assert line.startswith("the request path is the limit: the HTTP path caps at 10,100 images/s with 602 KB bodies; "
                           "the model's 12 instances would do 9,600 images/s (from Triton's compute times")
    shm = request_path_line(wire(transport="cuda_shm"), 6_000.0, None)
    assert shm == ("the CUDA shared-memory path caps at 10,100 images/s with 602 KB requests; "
                   "the model peaked at 6,000 images/s (59% of it)")
    assert "still rising" in request_path_line(wire(saturated=False), 6_000.0, None)
    assert "carried at least" in request_path_line(wire(client_bound=True), 6_000.0, None)


def test_assess_reads_the_peak_levels_server_statistics() -> None:
    at_peak = ServerBreakdown(request_count=100, inference_count=800, execution_count=100, compute_infer=0.010,
                              avg_batch_size=8.0)
    other = replace(at_peak, avg_batch_size=1.0)
    results = [result(8, 5_000.0, server=other), result(64, 9_000.0, server=at_peak),
               result(128, 12_000.0, status="failed", server=other)]
    found = assess(wire(), results, {"instance_group": [{"kind": "KIND_GPU", "count": 3, "gpus": [0]}]})
    assert (found.model_peak_ips, found.model_peak_level, found.at_limit) == (9_000.0, 64, True)
    assert found.capacity is not None and found.capacity.images_per_s == pytest.approx(3 * 8 / 0.010)
    assert found.line.startswith("the request path is the limit")


def test_only_sound_levels_make_the_wires_and_the_models_peak() -> None:
    """The one rule of every peak (engine/analysis/answer.py): an unstable or contended level
    serving more is noise, never the wire's ceiling nor the model's peak; with no sound level
    neither is decided, and the line says why."""
    noisy = [result(1, 900.0), result(4, 3_000.0), result(16, 9_000.0, status="unstable"),
             result(64, 9_500.0, status="contended")]
    w = wire_ceiling("vit", "http", 1, VIT_ITEM, False, noisy)
    assert (w.peak_ips, w.peak_level, w.not_decided) == (3_000.0, 4, "")
    assert [lv.status for lv in w.levels] == ["stable", "stable", "unstable", "contended"]
    assert not w.saturated  # 1 -> 4 still rising: the noisy levels say nothing of a plateau
    found = assess(w, noisy, {})
    assert (found.model_peak_ips, found.model_peak_level) == (3_000.0, 4)

    unsound = [replace(r, status="unstable") for r in noisy]
    none = wire_ceiling("vit", "http", 1, VIT_ITEM, False, unsound)
    assert none.peak_ips is None and none.peak_level is None and not none.saturated
    assert none.not_decided.startswith("no sound level: concurrency 1 unstable")
    assert request_path_line(none, None, None).startswith("the HTTP path: not decided with 602 KB bodies (no sound level")
    undecided = assess(wire(), unsound, {})
    assert undecided.model_peak_ips is None and not undecided.at_limit
    assert "; the model's peak is not decided (no sound level: concurrency 1 unstable" in undecided.line


def test_a_peak_without_triton_statistics_says_its_capacity_is_unknown() -> None:
    # a busy box's late statistics leave a level without its server breakdown
    found = assess(wire(), [result(8, 5_000.0), result(64, 9_000.0)],
                   {"instance_group": [{"kind": "KIND_GPU", "count": 3, "gpus": [0]}]})
    assert found.capacity is None
    assert found.line.endswith("; Triton's compute times at the model's peak (concurrency 64) are missing: "
                               "what its instances would do is not known")


def _diagnose(levels, w):
    # the wire's assessment reads the sweep's level results: the same levels, all sound
    found = assess(w, [result(e.level, e.throughput) for e in levels], {}) if w is not None else None
    return diagnose(levels, saturation_point([(e.level, e.throughput) for e in levels]), None, w, found)


def test_request_path_verdict() -> None:
    levels = sweep()  # peak 1020 at 16
    v = _diagnose(levels, wire(peak=1_100.0))
    assert v.kind == "request-path" and v.summary.startswith("the request path is the limit: the HTTP path caps at")
    assert "93% of it" in v.evidence[0] and "602,112 bytes per item" in v.evidence[2]
    assert not [f for f in v.findings if f.kind == "wire"]


def test_a_far_wire_is_a_finding_not_the_verdict() -> None:
    v = _diagnose(sweep(), wire(peak=3_000.0))
    assert v.kind != "request-path"
    (line,) = [f.text for f in v.findings if f.kind == "wire"]
    assert "the model peaked at 1,020 images/s (34% of it)" in line


def test_client_bound_still_wins_over_the_wire() -> None:
    assert _diagnose(sweep(client_bound=True), wire(peak=1_050.0)).kind == "client-bound"


def test_without_a_wire_check_the_verdict_is_as_before() -> None:
    levels = [ev(1, 200), ev(4, 700), ev(8, 1000), ev(16, 1020)]
    assert _diagnose(levels, None).kind == diagnose(levels, saturation_point([(e.level, e.throughput) for e in levels])).kind


def test_the_report_carries_the_wire_table_and_the_line(tmp_path: Path) -> None:
    # a synthetic session (invented figures) with a wire check that its peak comes close to
    events = synthetic_session(SyntheticRun(capacity_per_gpu_ips=150.0))
    end = next(e for e in events if isinstance(e, SessionEnded))
    events.insert(events.index(end), replace(wire(peak=620.0), ts=end.ts - 0.1))
    path = record_events(tmp_path / "wire.sqlite", events)
    with Recording.open(path) as rec:
        summary = summarize(rec)
    assert list(summary.wires) == [1]
    f = analyze(summary)
    assert f.verdict.kind == "request-path" and f.recommendation[1].startswith("Move the inputs off the HTTP body")
    text = to_markdown(build_report(summary, f))
    assert "## The wire's ceiling" in text and "| 64 | stable | 620" in text
    assert "Verdict: request-path: the request path is the limit: the HTTP path caps at 620.0 images/s with 602 KB bodies" in text
    assert "from Triton's compute times" in text


@pytest.mark.parametrize("embedded, url, local", [
    (True, "http://10.0.0.5:8000", True),  # the embedded server is ours, whatever address it binds
    (False, "http://127.0.0.1:8000", True),
    (False, "http://localhost:8000", True),
    (False, "http://[::1]:8000", True),
    (False, "http://10.0.0.5:8000", False),
    (False, "http://triton.example:8000", False),
])
def test_the_network_verdict_advises_by_where_the_server_runs(tmp_path: Path, embedded: bool, url: str, local: bool) -> None:
    """Time outside Triton's statistics that dominates (the "network" verdict): across a real
    network the client belongs next to the server; on loopback it already is, and the time is
    Triton's HTTP front end reading the bodies (measured on 4x H200), so the advice differs."""
    # a synthetic session (invented figures) given the "network" verdict: its generator cannot
    # put the time outside the server above half the latency at the saturation level
    events = synthetic_session(SyntheticRun(variant="1x", gpu_count=1, probe=False))
    events = [replace(e, embedded=embedded, http_url=url) if isinstance(e, ServerReady) else e for e in events]
    path = record_events(tmp_path / "net.sqlite", events)
    with Recording.open(path) as rec:
        f = analyze(summarize(rec))
    f.verdict = Verdict("network", "time outside Triton's model statistics dominates latency", [], f.verdict.level)
    f.recommendation = recommend(f)
    advice = " ".join(f.recommendation)
    if local:
        assert "HTTP front end reading the request bodies" in advice and "next to the server" not in advice
    else:
        assert "Run the client next to the server" in advice
