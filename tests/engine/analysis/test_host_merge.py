"""Merging several hosts' windows on the head: percentiles from summed histograms against every
host's raw samples, throughput summed, the client-bound host named, the worst status kept."""

from __future__ import annotations

import numpy as np
import pytest

from engine.analysis.clock_offset import Exchange, clock_offset
from engine.analysis.host_merge import (
    host_result,
    merged_sequence,
    merged_status,
    merged_window,
    stable_tail,
)
from engine.analysis.latency_histogram import RELATIVE_ERROR
from engine.analysis.latency_merge import merged_latency
from engine.analysis.percentiles import latency_stats
from engine.analysis.summed import merged_audit
from engine.events import ClientAudit, LatencyStats, SequenceStats, WindowResult
from engine.multihost.shares import host_share, too_small


def _window(samples_ns: np.ndarray, index: int = 1, t0: float = 100.0, audit: ClientAudit | None = None) -> WindowResult:
    return WindowResult(level=8.0, index=index, warmup=False, t_start=t0, t_end=t0 + 2.0, requests=samples_ns.size,
                        errors=0, throughput_rps=samples_ns.size / 2.0, throughput_ips=samples_ns.size / 2.0,
                        latency=latency_stats(samples_ns, histogram=True), audit=audit or ClientAudit())


def _hosts_samples() -> list[np.ndarray]:
    """Three hosts that saw different latencies: a near one, a far one, one with a long tail."""
    rng = np.random.default_rng(7)
    return [
        rng.lognormal(np.log(2e6), 0.3, 20_000).astype(np.int64),
        rng.lognormal(np.log(9e6), 0.2, 7_000).astype(np.int64),
        (rng.pareto(2.5, 12_000) * 1e6 + 5e5).astype(np.int64),
    ]


def test_merged_percentiles_match_every_hosts_raw_samples_within_the_stated_error() -> None:
    hosts = _hosts_samples()
    windows = [_window(s) for s in hosts]
    merged = merged_window(8.0, [(str(r), w) for r, w in enumerate(windows)], None)
    every = np.sort(np.concatenate(hosts))
    exact = latency_stats(every)  # perf_analyzer's rule over every host's raw samples
    for name in ("p50", "p90", "p95", "p99"):
        read, want = getattr(merged.latency, name), getattr(exact, name)
        assert abs(read - want) <= RELATIVE_ERROR * want, (name, read, want)
    # the exact figures stay exact: count, mean, min, max
    assert merged.latency.count == every.size
    assert merged.latency.mean == pytest.approx(every.mean() / 1e9, rel=1e-9)
    assert merged.latency.min == every[0] / 1e9 and merged.latency.max == every[-1] / 1e9
    assert merged.latency.exact is False  # read from a histogram: said so


def test_merged_window_sums_throughput_and_counts() -> None:
    hosts = _hosts_samples()
    windows = [_window(s) for s in hosts]
    merged = merged_window(8.0, [(str(r), w) for r, w in enumerate(windows)], None)
    assert merged.requests == sum(s.size for s in hosts)
    assert merged.throughput_rps == pytest.approx(sum(w.throughput_rps for w in windows))
    assert merged.latency.histogram is not None and merged.latency.count == merged.requests


def test_a_host_that_saw_no_request_does_not_move_the_percentiles() -> None:
    samples = _hosts_samples()[0]
    alone = merged_latency([latency_stats(samples, histogram=True)])
    with_idle = merged_latency([latency_stats(samples, histogram=True), LatencyStats(count=0)])
    assert alone == with_idle


def test_the_client_bound_host_is_named_in_the_verdict() -> None:
    calm = ClientAudit(cpu_percent=30.0)
    busy = ClientAudit(cpu_percent=190.0, client_bound=True, reasons=["load worker 0 busy 97 % of a core"])
    audit = merged_audit([("0 (head)", calm), ("2 (edge-b)", busy), ("1 (edge-a)", calm)])
    assert audit.client_bound
    assert audit.reasons == ["host 2 (edge-b): load worker 0 busy 97 % of a core"]
    assert audit.cpu_percent == 190.0
    assert not merged_audit([("0 (head)", calm), ("1 (edge-a)", calm)]).client_bound


def test_the_worst_host_status_stands() -> None:
    assert merged_status(["stable", "failed", "contended"], True) == "failed"
    assert merged_status(["stable", "contended"], True) == "contended"
    assert merged_status(["unstable", "unstable"], True) == "stable"  # the merged windows agree
    assert merged_status(["stable", "stable"], False) == "unstable"


def test_stable_tail_finds_the_last_windows_that_agree() -> None:
    base = _hosts_samples()[0]
    wins = [_window(base[: n], index=i) for i, n in enumerate([4000, 10_000, 10_000, 10_000, 3000])]
    assert stable_tail(wins, 3, 10.0) == 4  # windows 1-3 agree; 2-4 do not
    assert stable_tail(wins[:2], 3, 10.0) is None


def test_a_hosts_throughput_is_its_requests_over_its_windows() -> None:
    samples = _hosts_samples()[1]
    wins = [_window(samples[:3000], index=1, t0=10.0), _window(samples[3000:], index=2, t0=12.0)]
    host = host_result(1, "edge-a", wins, 1, ClientAudit(), 4.0, False, 1e-5, 4e-5)
    assert host.requests == samples.size and host.throughput_rps == pytest.approx(samples.size / 4.0)
    assert host.connections == 4 and host.target_rate is None


def test_the_clock_offset_rests_on_the_shortest_round_trip() -> None:
    # the host's clock runs 5 ms ahead; one exchange had a slow return leg
    exchanges = [Exchange(1_000, 5_000_000 + 1_600, 2_000), Exchange(3_000, 5_000_000 + 30_000, 60_000),
                 Exchange(10_000, 5_000_000 + 10_300, 10_600)]
    found = clock_offset(exchanges)
    assert found.rtt_ns == 600
    assert abs(found.offset_ns - 5_000_000) <= found.rtt_ns / 2
    assert found.to_head(5_000_000 + 10_300) == pytest.approx(10_300, abs=300)
    with pytest.raises(ValueError):
        clock_offset([])


@pytest.mark.parametrize("level,hosts", [(8, 3), (256, 4), (5, 5), (7, 2)])
def test_shares_add_up_and_differ_by_at_most_one(level: int, hosts: int) -> None:
    shares = [host_share(level, hosts, r, False) for r in range(hosts)]
    assert sum(shares) == level and max(shares) - min(shares) <= 1
    assert sum(host_share(float(level), hosts, r, True) for r in range(hosts)) == pytest.approx(level)


def test_a_level_below_the_hosts_is_named() -> None:
    assert too_small([1.0, 4.0, 2.0], 3, False) == [1.0, 2.0]
    assert too_small([1.0], 3, True) == []


def test_the_bottleneck_verdict_names_the_client_bound_host() -> None:
    from engine.analysis.bottleneck import diagnose, evidence_from_result
    from engine.analysis.saturation import saturation_point
    from engine.events import LevelResult

    calm = ClientAudit(cpu_percent=40.0)
    busy = ClientAudit(cpu_percent=99.0, client_bound=True, reasons=["load worker 0 busy 99 % of a core"])
    results = []
    for level, tp, audits in ((4, 700.0, [calm, calm]), (8, 1000.0, [calm, busy]), (16, 1010.0, [calm, busy])):
        results.append(LevelResult(
            mode="concurrency", level=level, index=len(results), status="stable", batch_size=1, windows=3,
            merged_windows=3, requests=int(tp * 6), errors=0, throughput_rps=tp, throughput_ips=tp,
            latency=LatencyStats(count=int(tp * 6), mean=0.01, p50=0.01, p99=0.02),
            audit=merged_audit([("0 (head)", audits[0]), ("1 (edge-a)", audits[1])])))
    levels = [evidence_from_result(r) for r in results]
    v = diagnose(levels, saturation_point([(e.level, e.throughput) for e in levels]))
    assert v.kind == "client-bound"
    assert any("host 1 (edge-a): load worker 0 busy" in line for line in v.evidence), v.evidence


def test_the_live_merge_and_merge_command_read_a_window_by_one_rule() -> None:
    """The head's live window and `gpuscale-tui merge`'s are the same figures: audit (the busiest
    host per core, the worst of each delay), counts and span; only the server's reading differs
    (the head reads Triton itself, `merge` takes the first host's)."""
    from engine.record.merge_fold import merged_window as merge_command_window

    samples = _hosts_samples()
    calm = ClientAudit(cpu_percent=50.0, cpu_cores=8, write_p99=0.002, loop_lag_p99=0.001, sent=100)
    busy = ClientAudit(cpu_percent=90.0, cpu_cores=2, write_p99=0.001, loop_lag_p99=0.030, sent=90, late_sends=3,
                       client_bound=True, reasons=["load worker 0 busy 97 % of a core"])
    windows = [_window(samples[0], audit=calm), _window(samples[1], audit=busy)]
    names = ["0 (head)", "1 (edge-a)"]
    live = merged_window(8.0, list(zip(names, windows, strict=True)), None)
    offline = merge_command_window(windows, names, 1)
    assert live.audit == offline.audit
    assert live.audit.cpu_percent == 90.0 and live.audit.cpu_cores == 2  # 45 % a core against 6 %
    assert live.audit.write_p99 == 0.002 and live.audit.loop_lag_p99 == 0.030
    assert live.audit.sent == 190 and live.audit.late_sends == 3
    assert live.audit.reasons == ["host 1 (edge-a): load worker 0 busy 97 % of a core"]
    assert (live.requests, live.throughput_rps, live.latency, live.t_start, live.t_end) == \
        (offline.requests, offline.throughput_rps, offline.latency, offline.t_start, offline.t_end)


def test_a_sequence_models_step_figures_merge_over_the_hosts() -> None:
    first, later = _hosts_samples()[:2]
    a = SequenceStats(latency_stats(first[:100], histogram=True), latency_stats(later[:900], histogram=True),
                      sequences_per_s=50.0, sequences=100, dropped=1)
    b = SequenceStats(latency_stats(first[100:300], histogram=True), latency_stats(later[900:2700], histogram=True),
                      sequences_per_s=100.0, sequences=200, dropped=0)
    window = merged_sequence([a, None, b])
    assert window is not None
    assert window.first_step.count == 300 and window.later_steps.count == 2700
    assert window.sequences == 300 and window.dropped == 1 and window.sequences_per_s == 150.0
    level = merged_sequence([a, b], duration_s=4.0)
    assert level is not None and level.sequences_per_s == 75.0
    assert merged_sequence([None, None]) is None
