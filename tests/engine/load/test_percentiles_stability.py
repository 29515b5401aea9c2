"""Percentiles (perf_analyzer's index rule) and the stability rule, on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from engine.analysis.percentiles import latency_stats, percentile_index
from engine.analysis.stability import is_stable, spread, within

MS = 1_000_000


def test_percentile_index_matches_perf_analyzer_rule():
    # int(q/100 * (n-1) + 0.5): n=10 -> p50: int(5.0)=5, p90: int(8.6)=8, p95: int(9.05)=9, p99: int(9.41)=9
    assert [percentile_index(10, q) for q in (50, 90, 95, 99)] == [5, 8, 9, 9]
    # n=4 -> p50: int(2.0)=2 (halves round up, unlike numpy's "nearest" which rounds to even)
    assert percentile_index(4, 50) == 2
    assert percentile_index(1, 99) == 0
    with pytest.raises(ValueError):
        percentile_index(0, 50)


def test_latency_stats_exact_from_unsorted_samples():
    samples = np.array([7, 1, 10, 3, 5, 2, 9, 4, 8, 6], dtype=np.int64) * MS
    stats = latency_stats(samples)
    assert stats.count == 10
    assert stats.exact
    assert stats.min == pytest.approx(0.001)
    assert stats.max == pytest.approx(0.010)
    assert stats.mean == pytest.approx(0.0055)
    assert stats.p50 == pytest.approx(0.006)
    assert stats.p90 == pytest.approx(0.009)
    assert stats.p95 == pytest.approx(0.010)
    assert stats.p99 == pytest.approx(0.010)


def test_latency_stats_empty_is_not_available_not_zero():
    stats = latency_stats(np.empty(0, np.int64))
    assert stats.count == 0
    assert stats.p50 is None and stats.mean is None and stats.max is None


def test_spread_and_within():
    assert spread([100.0, 110.0, 105.0]) == pytest.approx(0.10)
    assert within([100.0, 110.0, 105.0], 10)  # exactly at the limit passes
    assert not within([100.0, 110.5, 105.0], 10)
    assert spread([100.0, 0.0]) is None
    assert spread([]) is None


def test_is_stable_needs_both_throughput_and_latency_in_the_last_windows():
    assert is_stable([100, 105, 109], [1.0, 1.05, 1.02], 3, 10)
    assert not is_stable([100, 111, 105], [1.0, 1.0, 1.0], 3, 10)  # throughput 11 % apart
    assert not is_stable([100, 101, 102], [1.0, 1.2, 1.0], 3, 10)  # latency 20 % apart
    assert is_stable([50, 100, 105, 109], [9.0, 1.0, 1.05, 1.02], 3, 10)  # only the last 3 count
    assert not is_stable([100, 105], [1.0, 1.0], 3, 10)  # too few windows
    assert not is_stable([0, 0, 0], [1.0, 1.0, 1.0], 3, 10)  # zero throughput is never stable
    assert not is_stable([100, 100, 100], [None, 1.0, 1.0], 3, 10)  # a window without latency
