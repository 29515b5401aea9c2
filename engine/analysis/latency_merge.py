"""One latency figure from several that each kept their distribution (windows of several load
hosts): the histograms add up, and the percentiles are read from the sum by perf_analyzer's rank
rule, each within the histogram's RELATIVE_ERROR of the exact percentile of all the samples.
The count, mean, min and max combine exactly."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.analysis.latency_histogram import COUNTS_LEN, RELATIVE_ERROR, LatencyHistogram
from engine.analysis.percentiles import PERCENTILES, buckets_of, percentile_index, sparse_of
from engine.events import LatencyStats

__all__ = ["RELATIVE_ERROR", "NoHistogram", "histogram_percentiles", "merged_histogram", "merged_latency"]


class NoHistogram(ValueError):
    """A figure with samples but no distribution kept: it cannot be merged."""


def merged_histogram(parts: Sequence[LatencyStats]) -> LatencyHistogram:
    """The sum of the parts' histograms; NoHistogram where a part with samples kept none, and
    ValueError for one this tool cannot read. One bincount over every part's non-zero buckets."""
    indexes, counts = [], []
    for part in parts:
        if part.histogram is None:
            if part.count:
                raise NoHistogram("a latency figure without its histogram (recorded before they were kept)")
            continue
        index, count = sparse_of(part.histogram)
        indexes.append(index)
        counts.append(count)
    if not indexes:
        return LatencyHistogram()
    summed = np.bincount(np.concatenate(indexes), weights=np.concatenate(counts).astype(np.float64), minlength=COUNTS_LEN)
    return LatencyHistogram(summed.astype(np.uint64))  # float64 counts are exact below 2**53


def histogram_percentiles(histogram: LatencyHistogram) -> dict[int, float]:
    """PERCENTILES in ns, each the bucket of the sample perf_analyzer's rule picks; {} when empty."""
    n = histogram.total
    if n == 0:
        return {}
    return dict(zip(PERCENTILES, histogram.values_at_ranks(percentile_index(n, q) for q in PERCENTILES), strict=True))


def merged_latency(parts: Sequence[LatencyStats]) -> LatencyStats:
    """The figure of every part's samples together, keeping the merged histogram."""
    histogram = merged_histogram(parts)
    counted = [p for p in parts if p.count]
    n = sum(p.count for p in counted)
    if n == 0 or histogram.total != n:
        if n and histogram.total != n:
            raise ValueError(f"latency histograms hold {histogram.total} samples where the figures count {n}")
        return LatencyStats(count=0, exact=False, histogram=buckets_of(histogram))
    pick = {q: ns / 1e9 for q, ns in histogram_percentiles(histogram).items()}
    means = [p.mean for p in counted if p.mean is not None]
    mins = [p.min for p in counted if p.min is not None]
    maxes = [p.max for p in counted if p.max is not None]
    mean = sum(p.mean * p.count for p in counted if p.mean is not None) / n if len(means) == len(counted) else None
    return LatencyStats(
        count=n,
        mean=mean,
        min=min(mins) if mins else None,
        p50=pick[50],
        p90=pick[90],
        p95=pick[95],
        p99=pick[99],
        max=max(maxes) if maxes else None,
        exact=False,
        histogram=buckets_of(histogram),
    )
