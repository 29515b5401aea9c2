"""Statistics of repeated measurements, as seed 002 describes its method.

Warmup is excluded by the caller; here: modified Z-score outlier removal (Iglewicz and
Hoaglin, |M| > 3.5), the mean with a 95 % confidence interval from the t-distribution, and
Welch's two-tailed t-test (unequal variances) for "single versus multi". Distributions come
from scipy.stats, never from hand-written tables. Pure functions of plain floats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.events import StatSummary

MODIFIED_Z_THRESHOLD = 3.5
MODIFIED_Z_FACTOR = 0.6745  # Phi^-1(0.75): makes MAD consistent with sigma for normal data
MEAN_AD_FACTOR = 1.253314  # sqrt(pi/2): the same for the mean absolute deviation
DEFAULT_ALPHA = 0.05


def modified_z_scores(values: Sequence[float]) -> list[float]:
    """M_i = 0.6745 (x_i - median) / MAD.

    When more than half the values are equal the MAD is 0; then the mean absolute deviation
    stands in (M_i = (x_i - median) / (1.253314 MeanAD), as in IBM's SPSS definition), and
    when that is 0 as well every value equals the median and every score is 0.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return []
    median = float(np.median(x))
    dev = x - median
    mad = float(np.median(np.abs(dev)))
    if mad > 0:
        return [float(v) for v in MODIFIED_Z_FACTOR * dev / mad]
    mean_ad = float(np.mean(np.abs(dev)))
    if mean_ad > 0:
        return [float(v) for v in dev / (MEAN_AD_FACTOR * mean_ad)]
    return [0.0] * x.size


def remove_outliers(
    values: Sequence[float], threshold: float = MODIFIED_Z_THRESHOLD
) -> tuple[list[float], int]:
    """Values whose |modified Z| is at most ``threshold``, and how many were removed.

    Fewer than 3 values carry no notion of "unusual": they are returned unchanged.
    """
    vals = [float(v) for v in values]
    if len(vals) < 3:
        return vals, 0
    kept = [v for v, z in zip(vals, modified_z_scores(vals), strict=True) if abs(z) <= threshold]
    return kept, len(vals) - len(kept)


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float | None, float | None]:
    """Mean and its two-sided confidence interval, mean +- t_{(1+c)/2, n-1} s / sqrt(n).

    One value has no spread: its bounds are None ("not available"), never 0.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = float(np.mean(x))
    if x.size < 2:
        return mean, None, None
    sem = float(np.std(x, ddof=1)) / math.sqrt(x.size)
    from scipy import stats as _st  # here, not at import: scipy.stats takes ~1 s to load

    half = float(_st.t.ppf((1.0 + confidence) / 2.0, df=x.size - 1)) * sem
    return mean, mean - half, mean + half


def summarize(values: Sequence[float], confidence: float = 0.95) -> StatSummary:
    """Outliers removed, then mean, CI and sample standard deviation of what is left."""
    kept, removed = remove_outliers(values)
    mean, low, high = mean_ci(kept, confidence)
    std = float(np.std(kept, ddof=1)) if len(kept) >= 2 else None
    return StatSummary(mean=mean, ci_low=low, ci_high=high, n=len(kept), n_outliers=removed, std=std)


@dataclass(frozen=True)
class WelchResult:
    t: float
    df: float
    p_value: float


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> WelchResult | None:
    """Welch's two-tailed t-test of mean(a) == mean(b) without assuming equal variances.

    None where the test is undefined: fewer than 2 values on a side, or no spread in both.
    """
    if len(a) < 2 or len(b) < 2:
        return None
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return welch_from_stats(
        float(np.mean(xa)), float(np.std(xa, ddof=1)), xa.size,
        float(np.mean(xb)), float(np.std(xb, ddof=1)), xb.size,
    )


def welch_from_stats(
    mean_a: float, std_a: float, n_a: int, mean_b: float, std_b: float, n_b: int
) -> WelchResult | None:
    """The same test from summaries (mean, sample std, n): what a recorded StatSummary keeps."""
    if n_a < 2 or n_b < 2:
        return None
    va, vb = std_a * std_a / n_a, std_b * std_b / n_b
    if va + vb == 0:
        return None
    t = (mean_a - mean_b) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (n_a - 1) + vb * vb / (n_b - 1))
    from scipy import stats as _st

    p = float(_st.ttest_ind_from_stats(mean_a, std_a, n_a, mean_b, std_b, n_b, equal_var=False).pvalue)
    return WelchResult(t=t, df=df, p_value=p)


def welch_from_summaries(a: StatSummary, b: StatSummary) -> WelchResult | None:
    if a.std is None or b.std is None:
        return None
    return welch_from_stats(a.mean, a.std, a.n, b.mean, b.std, b.n)


def is_significant(p_value: float | None, alpha: float = DEFAULT_ALPHA) -> bool | None:
    """True/False at level alpha; None where no test could be made."""
    if p_value is None or math.isnan(p_value):
        return None
    return p_value < alpha
