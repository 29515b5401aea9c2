"""Mergeable latency distributions in HdrHistogram's bucket layout, in numpy.

Exact percentiles need every sample; two hosts' windows can only be combined through a
distribution that adds. HdrHistogram keeps `SIGNIFICANT_DIGITS` digits of every value, so a
percentile read from a merged histogram is within `RELATIVE_ERROR` of the exact one. The layout
here is HdrHistogram's (lowest 1 ns, highest one hour, 3 digits: bucket for bucket the counts the
`hdrhistogram` package records, which the tests check), kept in numpy because that package has
no wheels for Linux aarch64 and records at about 1 µs a sample in Python. Recording an array
is one `bincount`; merging is an addition; a recording keeps only the non-zero buckets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

SIGNIFICANT_DIGITS = 3
RELATIVE_ERROR = 10.0**-SIGNIFICANT_DIGITS  # bound on |read - exact| / exact for any value
HIGHEST_NS = 3_600 * 10**9  # one hour: a value above is clamped to it

# HdrHistogram's derived constants for lowest 1, highest HIGHEST_NS, 3 digits
_SUB_HALF_MAG = int(np.ceil(np.log2(2 * 10**SIGNIFICANT_DIGITS))) - 1  # 10
_SUB_HALF = 1 << _SUB_HALF_MAG  # 1024
_SUB_COUNT = 2 * _SUB_HALF  # 2048
_SUB_MASK = _SUB_COUNT - 1


def _bucket_count() -> int:
    smallest_untrackable, buckets = _SUB_COUNT, 1
    while smallest_untrackable <= HIGHEST_NS:
        smallest_untrackable <<= 1
        buckets += 1
    return buckets


COUNTS_LEN = (_bucket_count() + 1) * _SUB_HALF


def _index(values: np.ndarray) -> np.ndarray:
    """The counts index of every value (HdrHistogram's `counts_index_for`, on arrays)."""
    _, bit_length = np.frexp((values | _SUB_MASK).astype(np.float64))  # exact below 2**53
    bucket = bit_length.astype(np.int64) - (_SUB_HALF_MAG + 1)
    sub_bucket = values >> bucket
    return ((bucket + 1) << _SUB_HALF_MAG) + (sub_bucket - _SUB_HALF)


def _highest_equivalent(index: int) -> int:
    """The largest value that falls in the bucket at `index`."""
    bucket = (index >> _SUB_HALF_MAG) - 1
    sub_bucket = (index & (_SUB_HALF - 1)) + _SUB_HALF
    if bucket < 0:
        sub_bucket -= _SUB_HALF
        bucket = 0
    return (sub_bucket << bucket) + (1 << bucket) - 1


@dataclass
class LatencyHistogram:
    """Counts per HdrHistogram bucket of latencies in ns."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(COUNTS_LEN, np.uint64))

    @classmethod
    def of(cls, latency_ns: np.ndarray) -> LatencyHistogram:
        """The histogram of these samples; values outside [1 ns, one hour] are clamped."""
        if latency_ns.size == 0:
            return cls()
        values = np.clip(latency_ns.astype(np.int64), 1, HIGHEST_NS)
        return cls(np.bincount(_index(values), minlength=COUNTS_LEN).astype(np.uint64))

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def __add__(self, other: LatencyHistogram) -> LatencyHistogram:
        return LatencyHistogram(self.counts + other.counts)

    def percentile_ns(self, q: float) -> float:
        """The q-th percentile (0-100) by HdrHistogram's rule; NaN when empty."""
        cumulative = np.cumsum(self.counts)
        total = int(cumulative[-1])
        if total == 0:
            return float("nan")
        target = max(int(min(q, 100.0) * total / 100 + 0.5), 1)
        return float(_highest_equivalent(int(np.searchsorted(cumulative, target))))

    def value_at_rank(self, rank: int) -> float:
        """The largest value of the bucket holding the sample at 0-based ``rank`` in sorted
        order: within RELATIVE_ERROR of that sample. Raises IndexError outside 0..total-1."""
        return self.values_at_ranks([rank])[0]

    def values_at_ranks(self, ranks: Iterable[int]) -> list[float]:
        """``value_at_rank`` of each rank, over one pass of the counts."""
        cumulative = np.cumsum(self.counts)
        total = int(cumulative[-1])
        out = []
        for rank in ranks:
            if not 0 <= rank < total:
                raise IndexError(f"rank {rank} outside the histogram's {total} samples")
            out.append(float(_highest_equivalent(int(np.searchsorted(cumulative, rank, side="right")))))
        return out

    def log_bins(self, bins: int) -> list[tuple[float, float, int]]:
        """The counts in ``bins`` bins of equal width on a log scale, from the lowest bucket
        recorded to the highest: (low ns, high ns, count) each; [] when empty."""
        nz = np.flatnonzero(self.counts)
        if nz.size == 0 or bins < 1:
            return []
        bucket = (nz >> _SUB_HALF_MAG) - 1
        sub_bucket = (nz & (_SUB_HALF - 1)) + _SUB_HALF
        low = bucket < 0
        sub_bucket[low] -= _SUB_HALF
        bucket[low] = 0
        values = ((sub_bucket << bucket) + (1 << bucket) - 1).astype(np.float64)
        counts = self.counts[nz].astype(np.float64)
        lo, hi = float(values[0]), float(values[-1])
        if hi <= lo:
            return [(lo, hi, int(counts.sum()))]
        edges = np.geomspace(lo, hi, bins + 1)
        which = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, bins - 1)
        sums = np.bincount(which, weights=counts, minlength=bins)
        return [(float(edges[i]), float(edges[i + 1]), int(sums[i])) for i in range(bins)]

    def to_sparse(self) -> tuple[list[int], list[int]]:
        """(bucket indexes, counts) of the non-zero buckets: what a recording keeps."""
        nz = np.flatnonzero(self.counts)
        return nz.tolist(), self.counts[nz].tolist()

    @classmethod
    def from_sparse(cls, index: list[int], count: list[int]) -> LatencyHistogram:
        """Raises ValueError for an index outside the layout or a negative count."""
        idx = np.asarray(index, np.int64)
        cnt = np.asarray(count, np.int64)
        if idx.shape != cnt.shape or (idx.size and (idx.min() < 0 or idx.max() >= COUNTS_LEN)) or (cnt < 0).any():
            raise ValueError("latency histogram: bucket indexes or counts out of range")
        counts = np.zeros(COUNTS_LEN, np.uint64)
        np.add.at(counts, idx, cnt.astype(np.uint64))
        return cls(counts)


def sparse_of_sorted(sorted_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bucket indexes, counts) of the non-zero buckets of samples already sorted, without the
    dense counts: the indexes of sorted values are sorted, so each bucket is a run."""
    if sorted_ns.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    index = _index(np.clip(sorted_ns.astype(np.int64), 1, HIGHEST_NS))
    starts = np.flatnonzero(np.diff(index, prepend=-1))
    return index[starts], np.diff(starts, append=index.size)


def merged(parts: Iterable[LatencyHistogram]) -> LatencyHistogram:
    """One histogram holding every part's samples."""
    total = LatencyHistogram()
    for part in parts:
        total = total + part
    return total
