"""The Prometheus text parser, on the exposition format's corner cases."""

from __future__ import annotations

import math

from engine.telemetry.prometheus import parse_prometheus_text
from tests.engine.telemetry.conftest import TRITON_GPU_METRICS


def test_triton_documented_format():
    parsed = parse_prometheus_text(TRITON_GPU_METRICS)
    assert parsed.malformed == 0
    assert len(parsed.samples) == 13
    util = parsed.named("nv_gpu_utilization")
    assert [s.labels["gpu_uuid"] for s in util] == [
        "GPU-c06bbf33-c250-ca45-579b-19134b518844",
        "GPU-7f1e2d3c-0000-1111-2222-333344445555",
    ]
    assert util[0].value == 0.87
    assert parsed.named("nv_inference_request_success")[0].labels == {"model": "vit_tiny", "version": "1"}


def test_labels_with_escapes_commas_and_braces():
    text = 'm{a="x,y",b="say \\"hi\\"",c="back\\\\slash",d="line\\nbreak",e="{}"} 1\n'
    (s,) = parse_prometheus_text(text).samples
    assert s.labels == {"a": "x,y", "b": 'say "hi"', "c": "back\\slash", "d": "line\nbreak", "e": "{}"}


def test_values_timestamps_and_special_floats():
    text = "a 1.5e3\nb{} +Inf\nc{x=\"1\"} -Inf 1700000000000\nd NaN\ne 7 123\n"
    parsed = parse_prometheus_text(text)
    values = {s.name: s.value for s in parsed.samples}
    assert values["a"] == 1500.0 and values["b"] == math.inf and values["c"] == -math.inf
    assert math.isnan(values["d"]) and values["e"] == 7.0
    assert parsed.malformed == 0


def test_malformed_lines_are_counted_not_fatal():
    text = "good 1\nno_value\nbad{a=\"x\" 2\nbad2{a=x} 3\nworse 1 2 3\nnotnum abc\n# just a comment\n\nfine{a=\"1\"} 4\n"
    parsed = parse_prometheus_text(text)
    assert [s.name for s in parsed.samples] == ["good", "fine"]
    assert parsed.malformed == 5


def test_only_named_metrics_are_parsed():
    parsed = parse_prometheus_text(TRITON_GPU_METRICS + "junk{ 1\n", only={"nv_gpu_power_usage"})
    assert [s.value for s in parsed.samples] == [251.091, 51.5]
    assert parsed.malformed == 0  # lines of other names are skipped unread
