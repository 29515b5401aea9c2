"""Rate mode's arrival processes keep the level's rate (mean gap 1) and spread their gaps as
stated: constant none, Poisson a coefficient of variation of 1, gamma 1/sqrt(burstiness)."""

from __future__ import annotations

import random
import statistics

import pytest

from engine.load.arrivals import gap_factor

N = 20_000  # gaps per process: the mean's standard error is then under 1.5 % of the sd at burstiness 0.25


@pytest.mark.parametrize(("arrival", "burstiness", "cv"), [
    ("constant", 1.0, 0.0), ("poisson", 1.0, 1.0), ("gamma", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 4.0, 0.5),
])
def test_gaps_keep_the_rate_and_spread_as_stated(arrival: str, burstiness: float, cv: float) -> None:
    rng = random.Random(3)
    gaps = [gap_factor(rng, arrival, burstiness) for _ in range(N)]
    # tolerance: mean within 5 % (the rate kept), coefficient of variation within 8 %
    assert statistics.fmean(gaps) == pytest.approx(1.0, rel=0.05)
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(cv, rel=0.08, abs=1e-9)
