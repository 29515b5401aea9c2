from engine.analysis.bottleneck import LevelEvidence, diagnose, evidence_from_result
from engine.analysis.saturation import saturation_point
from engine.events import ClientAudit, LatencyStats, LevelResult, ServerBreakdown


def ev(level: float, tp: float, **kw) -> LevelEvidence:
    base = dict(latency_mean=0.010, queue=0.001, compute=0.008, client_minus_server=0.001)
    base.update(kw)
    return LevelEvidence(level=level, throughput=tp, **base)


def sweep(**at_peak) -> list[LevelEvidence]:
    """Saturates at 8 (1000 vs peak 1020 at 16); the keyword facts apply from level 8 on."""
    return [ev(1, 200), ev(4, 700), ev(8, 1000, **at_peak), ev(16, 1020, **at_peak)]


def verdict(levels: list[LevelEvidence], n: int | None = None):
    return diagnose(levels, saturation_point([(e.level, e.throughput) for e in levels]), n)


def test_client_bound_wins() -> None:
    v = verdict(sweep(client_bound=True, client_overhead=0.62, client_cpu_percent=100.0, gpu_util={"g": 95.0}))
    assert v.kind == "client-bound" and v.level == 8
    assert "100% CPU" in v.evidence[0]


def test_client_bound_above_the_saturation_point_counts() -> None:
    levels = [ev(1, 200), ev(4, 700), ev(8, 1000), ev(16, 1020, client_bound=True)]
    assert verdict(levels).kind == "client-bound"


def test_a_large_gap_outside_the_server_is_not_blamed_on_an_idle_client() -> None:
    # the gap is network + HTTP front end; the audit (CPU, loop lag) is what says "client"
    v = verdict(sweep(latency_mean=0.010, client_minus_server=0.007, client_overhead=0.7, client_cpu_percent=60.0))
    assert v.kind == "network" and "70%" in v.evidence[0]


def test_network() -> None:
    v = verdict(sweep(latency_mean=0.010, queue=0.001, compute=0.003, client_minus_server=0.006))
    assert v.kind == "network" and "60%" in v.evidence[0]


def test_compute_with_busy_gpus() -> None:
    v = verdict(sweep(gpu_util={"0": 90.0, "1": 84.0}, queue=0.012, compute=0.004))
    assert v.kind == "compute" and "87% busy" in v.evidence[0]


def test_queueing_with_idle_gpus() -> None:
    v = verdict(sweep(gpu_util={"0": 40.0}, queue=0.008, compute=0.002, latency_mean=0.011))
    assert v.kind == "queueing" and "queue 80%" in v.evidence[0]


def test_gpus_not_saturated() -> None:
    v = verdict(sweep(gpu_util={"0": 30.0, "1": 34.0}, queue=0.001, compute=0.004, latency_mean=0.006))
    assert v.kind == "gpus-not-saturated"


def test_without_gpu_telemetry() -> None:
    assert verdict(sweep(queue=0.006, compute=0.003)).kind == "queueing"
    assert verdict(sweep(queue=0.001, compute=0.008)).kind == "compute"


def test_no_server_statistics() -> None:
    assert verdict(sweep(queue=None, compute=None, client_minus_server=None)).kind == "unknown"


def test_not_saturated() -> None:
    v = verdict([ev(1, 100), ev(2, 200), ev(4, 400)])
    assert v.kind == "not-saturated" and v.level == 4


def test_only_the_configs_gpus_count() -> None:
    util = {"A": 95.0, "B": 96.0, "C": 0.0, "D": 0.0}
    assert verdict(sweep(gpu_util=util, queue=0.006, compute=0.004), n=2).kind == "compute"  # a 2x config
    v = verdict(sweep(gpu_util=util, queue=0.006, compute=0.004), n=4)  # a 4x config using half its GPUs
    assert v.kind == "queueing"
    assert [f.kind for f in v.findings] == ["gpu-imbalance"] and "B at 96% vs" in v.findings[0].text


def test_overload_finding() -> None:
    levels = [ev(1, 200), ev(4, 1000), ev(8, 1000), ev(16, 800)]
    v = verdict(levels)
    assert any(f.kind == "overload" and "20%" in f.text for f in v.findings)


def test_an_overload_is_read_from_sound_levels_only() -> None:
    # an unsound level serving more is no peak, and an unsound last level no fall past it
    noisy_peak = [ev(1, 200), ev(4, 900), ev(8, 1300, sound=False), ev(16, 850)]
    assert not [f for f in verdict(noisy_peak).findings if f.kind == "overload"]
    noisy_fall = [ev(1, 200), ev(4, 1000), ev(8, 1000), ev(16, 500, sound=False)]
    assert not [f for f in verdict(noisy_fall).findings if f.kind == "overload"]
    (found,) = [f.text for f in verdict([*noisy_fall, ev(32, 700)]).findings if f.kind == "overload"]
    assert found == "throughput falls 30% past the peak: 1,000/s at 4 vs 700.0/s at 32"


def test_empty() -> None:
    assert diagnose([], None).kind == "unknown"


def test_evidence_from_a_level_result() -> None:
    r = LevelResult(mode="concurrency", level=8, index=2, status="stable", batch_size=1, windows=3, merged_windows=3,
                    requests=10, errors=0, throughput_rps=5, throughput_ips=5, latency=LatencyStats(count=10, mean=0.02),
                    server=ServerBreakdown(request_count=10, inference_count=10, execution_count=5, queue=0.004,
                                           compute_input=0.001, compute_infer=0.01, compute_output=0.002,
                                           client_minus_server=0.003),
                    audit=ClientAudit(overhead_fraction=0.1, client_bound=False))
    e = evidence_from_result(r, {"g": 50.0})
    assert (e.level, e.queue, e.client_overhead, e.gpu_util) == (8.0, 0.004, 0.1, {"g": 50.0})
    assert abs(e.compute - 0.013) < 1e-12


def test_host_out_of_cpu_is_a_finding() -> None:
    v = verdict(sweep(host_cpu_percent=97.0, queue=0.006, compute=0.003))
    assert v.kind == "queueing" and any(f.kind == "host-cpu" and "97% busy" in f.text for f in v.findings)
    assert not verdict(sweep(host_cpu_percent=60.0)).findings
