"""A study's figures and report from recordings (synthetic sessions written through the real
Recorder: the figures are the model's, so only the arithmetic is under test)."""

import re

import pytest

from engine.events import GpuSample
from engine.study.figures import study_figures
from engine.study.index import StudyIndex, VariantRun, write_index
from engine.study.study_report import render_study
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.structs import replace


def _with_energy(events):
    """Give the synthetic NVML readings a cumulative energy counter: the integral of their power."""
    energy: dict[str, float] = {}
    last: dict[str, float] = {}
    out = []
    for e in events:
        if isinstance(e, GpuSample):
            gpus = []
            for g in e.gpus:
                if g.uuid in last:
                    energy[g.uuid] += g.power_w * (e.ts - last[g.uuid])
                else:
                    energy[g.uuid] = 1000.0
                last[g.uuid] = e.ts
                gpus.append(replace(g, energy_j=energy[g.uuid]))
            e = replace(e, gpus=gpus)
        out.append(e)
    return out


@pytest.fixture
def study(tmp_path):
    runs = []
    for variant, t0 in (("1x", 1_771_169_400.0), ("2x", 1_771_179_400.0)):
        run = SyntheticRun(gpu_model="H200", gpu_count=2, variant=variant, profile_name="2x_h200", cost_per_hour=8.0,
                           levels=[1, 4, 8, 16, 32], capacity_per_gpu_ips=200.0, base_latency_s=0.02, probe=False,
                           telemetry_hz=2.0, t0=t0)
        path = record_events(tmp_path / f"{variant}.sqlite", _with_energy(synthetic_session(run)))
        runs.append(VariantRun(variant, path.name, "ok", 0))
    index = StudyIndex(study_id="s", profile="2x_h200", model="openclip_vit_b32", variants=["1x", "2x"],
                       server="embedded", slo="p99=100ms", search_steps=0, runs=runs, status="ok")
    path = tmp_path / "s.study.json"
    write_index(index, path)
    return path


def test_per_config_figures(study):
    f = study_figures(study)
    one, two = f.configs
    assert (one.variant, one.units, two.units) == ("1x", 1, 2)
    assert one.peak_throughput == pytest.approx(200.0) and two.peak_throughput == pytest.approx(400.0)
    assert two.efficiency_peak == pytest.approx(1.0)
    # synthetic p99 = 1.6 x c / X: 1x meets 100 ms up to concurrency 8 (64 ms) and misses at 16 (128 ms)
    assert one.slo.level == 8 and one.slo.bounded and two.slo.level == 16
    # the 1x config on a 2-GPU box at $8/hr is priced pro rata: $4/hr
    assert one.cost_per_hour == pytest.approx(4.0) and "pro rata" in one.cost_basis
    assert one.cost_peak == pytest.approx(4.0 / (200.0 * 3600) * 1000)
    assert two.cost_slo == pytest.approx(8.0 / (two.slo.throughput * 3600) * 1000)
    # energy: 50 W + 250 W x busy on each config GPU; 1x counts GPU 0 only, 2x both, at full load
    assert "NVML" in one.energy_source
    assert one.j_per_image_peak == pytest.approx(300.0 / 200.0, rel=0.05)
    assert two.j_per_image_peak == pytest.approx(2 * 300.0 / two.peak_throughput, rel=0.05)
    assert [s.marginal for s in f.steps] == [pytest.approx(1.0)]
    assert f.stop.variant == "2x" and "at p99 <= 100 ms" in f.stop.reason


def test_report_has_every_config_and_the_chart(study):
    f = study_figures(study)
    md = render_study(f, "md")
    # peak, its level and p99; then the SLO level, in a table of its own
    assert "| 1x | 1 | 200.0 | 4 | 32.0 |" in md and "| 2x | 2 | 400.0 | 8 | 32.0 |" in md
    assert "| 1x | 8 |" in md and "| 2x | 16 |" in md
    assert "Stop at 2 GPUs, the largest config measured" in md
    assert "NVML total-energy counter" in md
    assert "inputs: random tensors;" in md and "sent different inputs" not in md
    html = render_study(f, "html")
    titles = re.findall(r"<svg[^>]*><title>([^<]*)</title>", html)
    assert titles == ["Throughput vs concurrency", "p99 latency vs concurrency", "Latency vs throughput (the knee)"]
    assert html.index("<svg") < html.index("<table")  # the charts come before the tables they sum up
    assert html.count("<polyline") == 2 + 2 + 4  # throughput and p99 per config; p50 and p99 per config on the knee
    assert html.count('stroke="#d62728" stroke-width="1.5" stroke-dasharray="6 3"') == 2  # the target on both latency charts
    assert "latency (ms, log)" in html


def test_missing_variant_is_said(study, tmp_path):
    import json

    data = json.loads(study.read_text())
    data["variants"].append("4x")
    data["status"] = "interrupted"
    study.write_text(json.dumps(data))
    md = render_study(study_figures(study), "md")
    assert "Missing from this study (not finished): 4x." in md


def test_a_served_configs_energy_counts_the_gpus_it_is_pinned_to(tmp_path):
    # a served LLM (study --serve) has no Triton config naming its GPUs: tp1 runs on GPU 0, tp2 on 0 and 1
    runs = []
    for variant, t0 in (("tp1", 1_771_169_400.0), ("tp2", 1_771_179_400.0)):
        run = SyntheticRun(gpu_model="H200", gpu_count=2, variant=variant, profile_name="2x_h200", cost_per_hour=8.0,
                           levels=[1, 4, 8], capacity_per_gpu_ips=200.0, base_latency_s=0.02, probe=False,
                           telemetry_hz=2.0, t0=t0)
        events = [replace(e, model_config={}) if hasattr(e, "model_config") else e for e in synthetic_session(run)]
        path = record_events(tmp_path / f"{variant}.sqlite", _with_energy(events))
        runs.append(VariantRun(variant, path.name, "ok", 0))
    index = StudyIndex(study_id="s", profile="2x_h200", model="gpuscale-llm", variants=["tp1", "tp2"],
                       server="served", slo=None, search_steps=0, runs=runs, status="ok")
    write_index(index, tmp_path / "s.study.json")
    one, two = study_figures(tmp_path / "s.study.json").configs
    assert one.j_per_image_peak == pytest.approx(300.0 / 200.0, rel=0.05)
    assert two.j_per_image_peak == pytest.approx(2 * 300.0 / two.peak_throughput, rel=0.05)
