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


def test_a_traces_gaps_keep_its_shape_and_order_at_any_rate() -> None:
    from engine.load.arrivals import TraceGaps, trace_gaps, trace_rate

    times = [0.0, 0.1, 0.1, 0.1, 1.0, 1.2]  # a burst of three, a pause, then two
    gaps = trace_gaps(times)
    assert gaps is not None and trace_rate(times) == pytest.approx(5 / 1.2)
    assert gaps == pytest.approx((0.1 / 0.24, 0.0, 0.0, 0.9 / 0.24, 0.2 / 0.24, 1.0))  # over the mean gap, 0.24 s
    walk = TraceGaps(gaps, 4)  # a worker that starts at request 4 takes its gaps from there, then wraps
    assert [walk.take() for _ in range(3)] == pytest.approx([0.2 / 0.24, 1.0, 0.1 / 0.24])
    assert trace_gaps([5.0, 5.0, 5.0]) is None and trace_rate([1.0]) is None  # no time passes: no rate to scale
