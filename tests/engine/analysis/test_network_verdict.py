"""The network rule with a measured path: the gap outside the server set against the round trip
(plus the transfer time where the bandwidth is known)."""

from engine.analysis.bottleneck import LevelEvidence, diagnose, evidence_from_result
from engine.analysis.saturation import saturation_point
from engine.events import LatencyStats, LevelResult, NetworkPath, ServerBreakdown


def ev(level: float, tp: float, **kw) -> LevelEvidence:
    base = dict(latency_mean=0.050, queue=0.001, compute=0.004, client_minus_server=0.045)
    base.update(kw)
    return LevelEvidence(level=level, throughput=tp, **base)


def saturating(**kw) -> list[LevelEvidence]:
    return [ev(1, 20, **kw), ev(4, 70, **kw), ev(8, 100, **kw), ev(16, 102, **kw)]


def rising(**kw) -> list[LevelEvidence]:
    return [ev(1, 20, **kw), ev(2, 40, **kw), ev(4, 80, **kw)]


def verdict(levels: list[LevelEvidence]):
    return diagnose(levels, saturation_point([(e.level, e.throughput) for e in levels]))


def test_a_gap_explained_by_the_round_trip_names_the_network_and_its_rtt() -> None:
    v = verdict(saturating(rtt=0.042, rtt_method="health probe"))
    assert v.kind == "network"
    assert v.summary.startswith("the network: the client is 42.0 ms from the server (round trip by health probe)")
    assert any("bandwidth not measured" in line for line in v.evidence)  # the transfer is said to be left out


def test_the_transfer_time_at_a_measured_bandwidth_counts_towards_the_path() -> None:
    # 10 ms round trip alone explains 22% of a 45 ms gap; + 2 MB at 100 MB/s (20 ms) explains 67%
    alone = verdict(saturating(rtt=0.010, rtt_method="health probe", request_bytes=2_000_000))
    assert alone.kind == "network" and not alone.summary.startswith("the network:")
    assert any("explains only 10.0 ms" in line for line in alone.evidence)
    with_transfer = verdict(saturating(rtt=0.010, rtt_method="health probe", request_bytes=2_000_000, bandwidth=1e8))
    assert with_transfer.summary.startswith("the network: the client is 10.0 ms from the server")
    assert any("20.0 ms to send 2 MB at 0.100 GB/s" in line for line in with_transfer.evidence)


def test_a_gap_the_round_trip_does_not_explain_stays_unnamed() -> None:
    v = verdict(saturating(rtt=0.0001, rtt_method="health probe"))
    assert v.kind == "network" and v.summary.startswith("time outside Triton's model statistics")
    assert any("the rest is the HTTP front end" in line for line in v.evidence)


def test_without_a_measured_path_the_rule_is_unchanged() -> None:
    v = verdict(saturating())
    assert v.kind == "network" and v.summary.startswith("time outside Triton's model statistics")
    assert len(v.evidence) == 1 and "90%" in v.evidence[0]


def test_a_sweep_that_never_saturated_names_a_long_round_trip() -> None:
    v = verdict(rising(rtt=0.041, rtt_method="health probe"))
    assert v.kind == "network" and "41.0 ms from the server" in v.summary
    assert "more concurrency hides the round trip" in v.summary


def test_a_sweep_that_never_saturated_on_loopback_stays_not_saturated() -> None:
    # a round trip under 1 ms never explains a sweep, however small the latency
    v = verdict(rising(latency_mean=0.0005, client_minus_server=0.0004, rtt=0.0003, rtt_method="health probe"))
    assert v.kind == "not-saturated"


def test_the_evidence_reads_the_level_result_s_path() -> None:
    result = LevelResult(mode="concurrency", level=4, index=0, status="stable", batch_size=1, windows=3,
                         merged_windows=2, requests=100, errors=0, throughput_rps=80.0, throughput_ips=80.0,
                         latency=LatencyStats(count=100, mean=0.05),
                         server=ServerBreakdown(1, 1, 1, client_minus_server=0.045),
                         network=NetworkPath(rtt=0.04, rtt_method="health probe", request_bytes=64))
    e = evidence_from_result(result)
    assert (e.rtt, e.rtt_method, e.request_bytes, e.bandwidth) == (0.04, "health probe", 64, None)
    old = evidence_from_result(LevelResult(mode="concurrency", level=4, index=0, status="stable", batch_size=1,
                                           windows=3, merged_windows=2, requests=100, errors=0, throughput_rps=80.0,
                                           throughput_ips=80.0, latency=LatencyStats(count=100, mean=0.05)))
    assert old.rtt is None and old.rtt_method == ""


def test_a_round_trip_that_is_most_of_the_latency_outranks_a_busy_host() -> None:
    # the server on this host behind a delaying proxy, the host's CPUs full of other work
    busy = dict(host_cpu_percent=97.0, own_cpu_percent=20.0, server_cpu_percent=30.0)
    levels = rising(rtt=0.040, rtt_method="health probe", **busy)
    v = diagnose(levels, saturation_point([(e.level, e.throughput) for e in levels]), server_local=True, host_cores=2)
    assert v.kind == "network" and "40.0 ms from the server" in v.summary
    assert any(f.kind == "host-cpu" for f in v.findings)  # the full host is still said
    unmeasured = rising(**busy)
    v = diagnose(unmeasured, saturation_point([(e.level, e.throughput) for e in unmeasured]), server_local=True,
                 host_cores=2)
    assert v.kind == "host-cpu"
