"""The fidelity targets over the `fidelity` stage's rows (bench/fidelity_targets.py)."""

from __future__ import annotations

from bench.fidelity_targets import cell_verdict, pa_client_limit


def _round(thr: float, pa_thr: float, p50: float, pa_p50: float, *, mode: str = "concurrency",
           pa_wait_us: float = 0.0, pa_mean_ms: float = 10.0, delayed: float | None = None,
           p50_uncorrected: float | None = None) -> dict:
    ours = {"throughput": thr, "p50_ms": p50, "p50_uncorrected_ms": p50_uncorrected}
    pa = {"throughput": pa_thr, "p50_ms": pa_p50, "mean_ms": pa_mean_ms, "client_wait_us_per_request": pa_wait_us,
          "extra": {} if delayed is None else {"delayed_pct": delayed}}
    row = {"mode": mode, "ours": ours, "perf_analyzer": pa, "throughput_ratio": thr / pa_thr, "p50_ratio": p50 / pa_p50}
    if p50_uncorrected is not None:
        row["p50_uncorrected_ratio"] = p50_uncorrected / pa_p50
    return row


def test_a_level_within_every_band_is_met() -> None:
    v = cell_verdict([_round(1000, 980, 5.0, 5.1), _round(1010, 1000, 5.1, 5.0), _round(990, 1000, 5.0, 5.0)])
    assert v.met, v.text()
    assert v.parts == ["throughput 1.01 ok", "p50 1.00 ok", "our spread 2.0 % ok"]


def test_each_band_missed_is_named() -> None:
    v = cell_verdict([_round(1250, 1000, 4.0, 5.0), _round(1150, 1000, 4.1, 5.0)])
    assert not v.met
    assert v.parts == ["throughput 1.20 outside [0.95, 1.05]", "p50 0.81 outside +-10 %", "our spread 8.3 % over 5 %"]


def test_throughput_is_not_judged_where_perf_analyzers_client_waited_for_a_cpu() -> None:
    rows = [_round(1780, 1000, 5.6, 10.0, pa_wait_us=6500, pa_mean_ms=50.0), _round(1780, 1000, 5.6, 10.0)]
    assert pa_client_limit(rows) == "its threads waited for a CPU 13 % of its latency"
    v = cell_verdict(rows)
    assert v.parts[0] == ("throughput 1.78 not judged: perf_analyzer's client was the limit "
                          "(its threads waited for a CPU 13 % of its latency)")
    assert not v.met  # the p50 still counts: 0.56 is outside the band
    small = [_round(1150, 1000, 5.0, 5.0, pa_wait_us=600, pa_mean_ms=25.0), _round(1150, 1000, 5.0, 5.0)]
    assert pa_client_limit(small) is None  # 2.4 % of its latency: not the limit
    assert "outside" in cell_verdict(small).parts[0]


def test_rate_mode_judges_the_uncorrected_p50_and_the_spread_of_our_p50() -> None:
    rows = [_round(2500, 2500, 7.0, 5.0, mode="rate", p50_uncorrected=5.2, delayed=0.0),
            _round(2500, 2500, 7.2, 5.0, mode="rate", p50_uncorrected=5.3, delayed=2.5)]
    v = cell_verdict(rows)
    assert v.parts == ["throughput 1.00 ok", "p50 1.05 (corrected 1.42) ok", "our spread 1.9 % ok"]
    assert v.met
    assert pa_client_limit(rows) == "it delayed 2.5 % of its requests"


def test_no_round_with_both_results_is_not_met() -> None:
    row = _round(1000, 1000, 5.0, 5.0)
    row["throughput_ratio"] = None
    assert cell_verdict([row]).text() == "NOT met: no round where both tools gave a result"
    assert cell_verdict([_round(1000, 1000, 5.0, 5.0)]).parts[-1] == "our spread n/a (one round)"
