"""Latency figures merged through their histograms, checked against the raw samples: the merged
percentiles against perf_analyzer's exact percentiles of every sample together, within the
histogram's stated relative error; count, mean, min and max exactly."""

from __future__ import annotations

import base64
import zlib

import numpy as np
import pytest

from engine.analysis import histogram_codec
from engine.analysis.latency_histogram import RELATIVE_ERROR, LatencyHistogram
from engine.analysis.latency_merge import NoHistogram, merged_latency
from engine.analysis.percentiles import PERCENTILES, buckets_of, histogram_of, latency_stats
from engine.events import LatencyBuckets, LatencyStats


def _hosts(seed: int, shapes: list[tuple[float, float, int]]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.lognormal(np.log(median), sigma, n).astype(np.int64) for median, sigma, n in shapes]


CASES = [
    [(5e6, 0.3, 1000), (5e6, 0.3, 1000)],  # two like hosts
    [(2e6, 0.2, 5000), (9e6, 0.5, 300)],  # a slow host with few samples: the tail is its
    [(40e3, 0.1, 50), (3e9, 1.0, 70), (1.2e6, 0.05, 20_000)],  # µs to seconds
    [(5e6, 0.3, 1)] * 64,  # many hosts of one sample
]


@pytest.mark.parametrize("shapes", CASES)
def test_merged_percentiles_are_those_of_every_sample_within_the_stated_error(shapes: list) -> None:
    samples = _hosts(len(shapes), shapes)
    parts = [latency_stats(s, histogram=True) for s in samples]
    merged = merged_latency(parts)
    everything = np.sort(np.concatenate(samples))
    exact = latency_stats(everything)  # perf_analyzer's rule over the raw union
    assert merged.count == exact.count == everything.size
    for q in PERCENTILES:
        got, want = getattr(merged, f"p{q}"), getattr(exact, f"p{q}")
        assert want <= got <= want * (1 + RELATIVE_ERROR), (q, got, want)
    assert merged.mean == pytest.approx(exact.mean, rel=1e-12)
    assert (merged.min, merged.max) == (exact.min, exact.max)
    assert merged.exact is False and merged.histogram is not None
    assert histogram_of(merged.histogram).total == everything.size


def test_the_merged_histogram_is_that_of_every_sample() -> None:
    samples = _hosts(7, [(5e6, 0.4, 3000), (6e6, 0.4, 2000)])
    merged = merged_latency([latency_stats(s, histogram=True) for s in samples])
    assert merged.histogram == buckets_of(LatencyHistogram.of(np.concatenate(samples)))


def test_buckets_round_trip() -> None:
    samples = np.array([1, 1, 5, 127, 128, 1_000_000, 1_000_001, 3_600 * 10**9 + 5], np.int64)
    kept = latency_stats(samples, histogram=True).histogram
    assert kept is not None and kept.buckets == len(np.unique(LatencyHistogram.of(samples).to_sparse()[0]))
    assert np.array_equal(histogram_of(kept).counts, LatencyHistogram.of(samples).counts)
    index, counts = histogram_codec.decode(kept)
    assert index.tolist() == LatencyHistogram.of(samples).to_sparse()[0] and counts.sum() == samples.size
    assert latency_stats(np.empty(0, np.int64), histogram=True).histogram == LatencyBuckets(data="", buckets=0)
    # large counts and gaps survive the varints (a count past 2**32, the last bucket)
    big = histogram_codec.decode(histogram_codec.encode(np.array([0, 1, 33_791]), np.array([2**40, 1, 127])))
    assert big[0].tolist() == [0, 1, 33_791] and big[1].tolist() == [2**40, 1, 127]


def _kept(values: list[int], buckets: int | None = None, digits: int = 3, raw: bytes | None = None) -> LatencyBuckets:
    body = raw if raw is not None else histogram_codec._varints(np.array(values, np.int64))
    return LatencyBuckets(data=base64.b64encode(zlib.compress(body)).decode(), digits=digits,
                          buckets=len(values) // 2 if buckets is None else buckets)


@pytest.mark.parametrize("bad", [
    _kept([1, 2, 3, 4], buckets=1),  # more numbers than its buckets
    _kept([10**9, 1]),  # an index past the layout
    _kept([30_000, 1, 30_000, 1]),  # the second index past it
    _kept([5, 1], digits=2),
    _kept([], raw=b"\x81"),  # a truncated number
    _kept([], raw=b"\xff" * 12 + b"\x01"),  # a number past 64 bits
    LatencyBuckets(data="not base64!", buckets=1),
    LatencyBuckets(data=base64.b64encode(b"not zlib").decode(), buckets=1),
    LatencyBuckets(data=base64.b64encode(zlib.compress(b"\x01" * 2_000_000)).decode(), buckets=1),  # a zlib bomb
    LatencyBuckets(data="", buckets=-1),
])
def test_an_unreadable_histogram_is_a_value_error(bad: LatencyBuckets) -> None:
    with pytest.raises(ValueError):
        histogram_of(bad)


def test_a_figure_without_its_histogram_does_not_merge() -> None:
    with_one = latency_stats(np.arange(1, 100), histogram=True)
    without = latency_stats(np.arange(1, 100))
    with pytest.raises(NoHistogram):
        merged_latency([with_one, without])
    # an empty figure has no samples to lose
    assert merged_latency([with_one, LatencyStats(count=0)]).count == 99


def test_log_bins_hold_every_sample() -> None:
    samples = _hosts(3, [(5e6, 0.5, 4000)])[0]
    bins = LatencyHistogram.of(samples).log_bins(10)
    assert len(bins) == 10 and sum(c for _lo, _hi, c in bins) == samples.size
    assert bins[0][0] <= samples.min() * (1 + RELATIVE_ERROR) and bins[-1][1] >= samples.max()
    assert all(lo < hi for lo, hi, _c in bins)


def test_a_streaming_windows_ttft_and_itl_keep_their_histograms() -> None:
    from engine.load.windows import Aggregate, StreamSamples, stream_stats

    rng = np.random.default_rng(11)
    ttft, itl = rng.integers(10**6, 10**8, 500), rng.integers(10**5, 10**7, 4000)
    agg = Aggregate(0, 10, 1.0, ok=500, stream=StreamSamples(
        ttft_ns=ttft, responses=np.full(500, 9), decode_ns=rng.integers(10**6, 10**8, 500), itl_ns=itl, tokens=np.full(500, 9)))
    stats = stream_stats(agg)
    assert stats is not None and stats.ttft.histogram is not None and stats.itl.histogram is not None
    assert histogram_of(stats.ttft.histogram).total == 500 and histogram_of(stats.itl.histogram).total == 4000
    two, exact = merged_latency([stats.itl, stats.itl]), latency_stats(np.concatenate([itl, itl]))
    assert two.count == 8000 and exact.p99 <= two.p99 <= exact.p99 * (1 + RELATIVE_ERROR)
