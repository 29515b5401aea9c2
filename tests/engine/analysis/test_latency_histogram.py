"""The numpy histogram against the hdrhistogram package and against exact percentiles."""

import numpy as np
import pytest

from engine.analysis.latency_histogram import HIGHEST_NS, RELATIVE_ERROR, LatencyHistogram, merged

hdrh = pytest.importorskip("hdrh.histogram")


def _samples(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # from sub-µs to minutes: every bucket range of a real run and beyond
    return np.concatenate([rng.lognormal(15, 2.5, n).astype(np.int64), [1, 2, 2047, 2048, 4096, HIGHEST_NS]])


def test_counts_and_percentiles_are_hdrhistograms() -> None:
    values = _samples(20_000)
    ours = LatencyHistogram.of(values)
    ref = hdrh.HdrHistogram(1, HIGHEST_NS, 3)
    for v in values.tolist():
        assert ref.record_value(v)
    assert ref.counts_len == ours.counts.size
    assert np.array_equal(np.frombuffer(ref.counts, np.uint64, ref.counts_len), ours.counts)
    for q in (0.1, 50, 90, 99, 99.9, 100):
        assert ours.percentile_ns(q) == ref.get_value_at_percentile(q)


@pytest.mark.parametrize("q", [50, 90, 95, 99, 99.9])
def test_merged_percentile_is_exact_within_the_stated_error(q: float) -> None:
    hosts = [_samples(5_000, seed) for seed in range(4)]
    merged_h = merged(LatencyHistogram.of(h) for h in hosts)
    everything = np.concatenate(hosts)
    exact = float(np.percentile(everything, q, method="inverted_cdf"))
    assert merged_h.total == everything.size
    assert abs(merged_h.percentile_ns(q) - exact) <= RELATIVE_ERROR * exact


def test_sparse_form_round_trips_and_refuses_garbage() -> None:
    h = LatencyHistogram.of(_samples(1_000))
    back = LatencyHistogram.from_sparse(*h.to_sparse())
    assert np.array_equal(back.counts, h.counts)
    with pytest.raises(ValueError):
        LatencyHistogram.from_sparse([10**9], [1])
    with pytest.raises(ValueError):
        LatencyHistogram.from_sparse([1, 2], [1])


def test_empty_histogram_has_no_percentile() -> None:
    assert np.isnan(LatencyHistogram.of(np.empty(0, np.int64)).percentile_ns(99))
