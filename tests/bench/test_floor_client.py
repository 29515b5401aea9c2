"""bench.tools.run_floor against the real embedded server: the bytes it sends are answered, and
what it counts is what the server counted."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.common import model_stats
from bench.tools import run_floor

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_floor_sends_our_requests_and_counts_what_the_server_served(shapes_server) -> None:
    url = shapes_server.http_url
    args = argparse.Namespace(batch=1, window_ms=300)
    before = model_stats(url, "datacheck").get("requests", 0)
    m = run_floor(url, "datacheck", args, input_data=str(ROOT / "tests/data/datacheck_same_shape.json"))
    served = model_stats(url, "datacheck").get("requests", 0) - before
    assert m.ok and m.status == "measured", m.status
    # datacheck answers only real data with 200 (random inputs get 400): the floor counted only
    # 200s, and the server served those and the warm-up window's
    assert 0 < m.extra["requests"] < served
    assert m.p50_ms is not None and 0 < m.p50_ms <= m.p99_ms
    assert m.server_us_per_request is not None and m.server_us_per_request > 0


@pytest.mark.slow
def test_the_floor_does_not_count_refused_requests(shapes_server) -> None:
    m = run_floor(shapes_server.http_url, "datacheck", argparse.Namespace(batch=1, window_ms=100))  # random data: refused
    assert not m.ok
    assert m.status.endswith("answers were not 200 OK")
