"""Latency percentiles, computed the way perf_analyzer computes them.

perf_analyzer sorts the samples and takes ``sorted[int(q / 100 * (n - 1) + 0.5)]`` (nearest
rank on the 0..n-1 scale, halves rounded up). Using the same rule keeps our p50/p99 comparable
with theirs sample for sample; numpy's default (linear interpolation) would not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from engine.analysis import histogram_codec
from engine.analysis.latency_histogram import LatencyHistogram, sparse_of_sorted
from engine.events import LatencyBuckets, LatencyStats

PERCENTILES = (50, 90, 95, 99)


def percentile_index(n: int, q: float) -> int:
    """Index into n sorted samples of the q-th percentile (perf_analyzer's rule)."""
    if n <= 0:
        raise ValueError("no samples")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    return min(n - 1, int(q / 100.0 * (n - 1) + 0.5))


def concat_samples(parts: Iterable[np.ndarray | Sequence[int]]) -> np.ndarray:
    arrays = [np.asarray(p, dtype=np.int64) for p in parts]
    arrays = [a for a in arrays if a.size]
    if not arrays:
        return np.empty(0, dtype=np.int64)
    return np.concatenate(arrays)


def buckets_of(histogram: LatencyHistogram) -> LatencyBuckets:
    """The histogram as an event keeps it (engine/analysis/histogram_codec.py)."""
    nz = np.flatnonzero(histogram.counts)
    return histogram_codec.encode(nz, histogram.counts[nz].astype(np.int64))


def buckets_of_sorted(sorted_ns: np.ndarray) -> LatencyBuckets:
    """``buckets_of(LatencyHistogram.of(sorted_ns))`` for sorted samples, at a cost that grows
    with the samples, not with the histogram's length."""
    return histogram_codec.encode(*sparse_of_sorted(sorted_ns))


def sparse_of(buckets: LatencyBuckets) -> tuple[np.ndarray, np.ndarray]:
    """(bucket indexes, counts) of the histogram an event keeps; ValueError for one of another
    layout, out of range or not decodable."""
    return histogram_codec.decode(buckets)


def histogram_of(buckets: LatencyBuckets) -> LatencyHistogram:
    """The histogram an event keeps; ValueError for one of another layout or out of range."""
    index, counts = sparse_of(buckets)
    return LatencyHistogram.from_sparse(index.tolist(), counts.tolist())


def latency_stats(samples_ns: np.ndarray | Sequence[int], histogram: bool = False) -> LatencyStats:
    """Exact stats of latency samples given in integer nanoseconds; result in seconds.
    ``histogram``: keep their distribution too (``LatencyStats.histogram``), so that the figure
    can be merged with others (windows, hosts).

    An empty sample gives ``count=0`` and every figure ``None`` (not available, never 0)."""
    data = np.sort(np.asarray(samples_ns, dtype=np.int64))
    n = int(data.size)
    if n == 0:
        return LatencyStats(count=0, histogram=buckets_of(LatencyHistogram()) if histogram else None)
    pick = {q: float(data[percentile_index(n, q)]) / 1e9 for q in PERCENTILES}
    return LatencyStats(
        count=n,
        mean=float(data.mean()) / 1e9,
        min=float(data[0]) / 1e9,
        p50=pick[50],
        p90=pick[90],
        p95=pick[95],
        p99=pick[99],
        max=float(data[-1]) / 1e9,
        exact=True,
        histogram=buckets_of_sorted(data) if histogram else None,
    )
