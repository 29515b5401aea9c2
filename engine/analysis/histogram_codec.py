"""The text a recording keeps of a latency histogram: its non-zero buckets, each as the gap from
the previous bucket's index (the first's from 0) and its count, interleaved as unsigned LEB128
varints, zlib-compressed, base64.

One string, not two lists of ints: a window's thousands of buckets cost the recorder one string
to copy and scan instead of thousands of numbers, and take about a fifth of the bytes
(docs/results/merge_cost.md). Both ways are numpy over the whole array, no Python loop.
"""

from __future__ import annotations

import base64
import binascii
import zlib

import numpy as np

from engine.analysis.latency_histogram import COUNTS_LEN, SIGNIFICANT_DIGITS
from engine.events import LatencyBuckets

_MAX_VARINT_BYTES = 10  # a uint64
_MAX_DECODED = 2 * COUNTS_LEN * _MAX_VARINT_BYTES  # a bound on the inflated bytes: no zlib bomb


def _varints(values: np.ndarray) -> bytes:
    """Unsigned LEB128 of non-negative int64 values."""
    v = values.astype(np.uint64)
    sizes = np.ones(v.size, np.int64)
    rest = v >> np.uint64(7)
    while rest.any():
        sizes += rest > 0
        rest >>= np.uint64(7)
    starts = np.cumsum(sizes) - sizes
    owner = np.repeat(np.arange(v.size), sizes)
    place = np.arange(owner.size) - starts[owner]
    out = (v[owner] >> (np.uint64(7) * place.astype(np.uint64))) & np.uint64(0x7F)
    more = place < sizes[owner] - 1
    out[more] |= np.uint64(0x80)
    return out.astype(np.uint8).tobytes()


def _from_varints(raw: bytes) -> np.ndarray:
    """The values of unsigned LEB128 bytes; ValueError for a truncated or oversized one."""
    b = np.frombuffer(raw, np.uint8)
    if b.size == 0:
        return np.empty(0, np.int64)
    ends = np.flatnonzero(b < 0x80)
    if ends.size == 0 or ends[-1] != b.size - 1:
        raise ValueError("latency histogram: a truncated number")
    starts = np.concatenate(([0], ends[:-1] + 1))
    if int((ends - starts).max()) >= _MAX_VARINT_BYTES - 1:  # 9 bytes hold 63 bits: an int64's worth
        raise ValueError("latency histogram: a number too large")
    owner = np.repeat(np.arange(ends.size), ends - starts + 1)
    place = np.arange(b.size) - starts[owner]
    parts = (b & 0x7F).astype(np.uint64) << (np.uint64(7) * place.astype(np.uint64))
    return np.add.reduceat(parts, starts).astype(np.int64)


def encode(index: np.ndarray, counts: np.ndarray) -> LatencyBuckets:
    """The kept form of a histogram's non-zero buckets (sorted indexes, their counts)."""
    values = np.empty(2 * index.size, np.int64)
    values[0::2] = np.diff(index, prepend=0)
    values[1::2] = counts
    data = base64.b64encode(zlib.compress(_varints(values), 1)).decode("ascii") if index.size else ""
    return LatencyBuckets(data=data, buckets=int(index.size), digits=SIGNIFICANT_DIGITS)


def decode(kept: LatencyBuckets) -> tuple[np.ndarray, np.ndarray]:
    """(bucket indexes, counts) of a kept histogram; ValueError for one of another layout, out of
    range or not decodable."""
    if kept.digits != SIGNIFICANT_DIGITS:
        raise ValueError(f"latency histogram of {kept.digits} significant digits (this tool keeps {SIGNIFICANT_DIGITS})")
    if not 0 <= kept.buckets <= COUNTS_LEN:
        raise ValueError(f"latency histogram of {kept.buckets} buckets (the layout has {COUNTS_LEN})")
    if not kept.data:
        values = np.empty(0, np.int64)
    else:
        try:
            inflater = zlib.decompressobj()
            raw = inflater.decompress(base64.b64decode(kept.data, validate=True), _MAX_DECODED)
            if inflater.unconsumed_tail or not inflater.eof:
                raise ValueError("latency histogram: more data than its buckets can hold, or cut short")
        except (binascii.Error, zlib.error) as exc:
            raise ValueError(f"latency histogram: not decodable ({exc})") from None
        values = _from_varints(raw)
    if values.size != 2 * kept.buckets:
        raise ValueError(f"latency histogram: {values.size} numbers for {kept.buckets} buckets")
    gaps, counts = values[0::2], values[1::2]
    if gaps.size and (int(gaps.max()) >= COUNTS_LEN or int(np.cumsum(gaps)[-1]) >= COUNTS_LEN):
        raise ValueError("latency histogram: bucket indexes out of range")
    return np.cumsum(gaps), counts
