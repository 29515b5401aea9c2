"""The scale-out answer in a study's figures and report, in compare, and on the study's screens,
from synthetic recordings (written through the real Recorder): 1x, 2x and 1x*2 on a 2-GPU box."""


import msgspec
import pytest

from engine import events as ev
from engine.analysis.scale_out import SCALE_OUT, SCALE_UP
from engine.record.compare import compare, render_compare
from engine.record.reader import Recording
from engine.study.figures import study_figures
from engine.study.index import StudyIndex, VariantRun, write_index
from engine.study.study_report import render_study
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.engine.study.replayed_end import replayed_end
from tui.study_headless import StudyPrinter
from tui.study_state import StudyState
from tui.study_view import scale_answers

# images/s at the peak: 1x 200, 2x 360 (one server, two GPUs), 1x*2 400 (two servers of one GPU)
CAPACITY = {"1x": 200.0, "2x": 180.0, "1x*2": 400.0}  # per GPU of the synthetic config (1x*2 counts as one)


def _study(tmp_path, slo="p99=100ms", **index_fields):
    runs = []
    for k, variant in enumerate(CAPACITY):
        run = SyntheticRun(gpu_model="H200", gpu_count=2, variant=variant, profile_name="2x_h200", cost_per_hour=8.0,
                           levels=[1, 4, 8, 16, 32], capacity_per_gpu_ips=CAPACITY[variant], base_latency_s=0.02,
                           probe=False, telemetry_hz=1.0, t0=1_771_169_400.0 + 10_000 * k)
        path = record_events(tmp_path / f"{variant.replace('*', '_')}.sqlite", synthetic_session(run))
        runs.append(VariantRun(variant, path.name, "ok", 0))
    index = StudyIndex(study_id="s", profile="2x_h200", model="openclip_vit_b32", variants=list(CAPACITY),
                       server="embedded", slo=slo, runs=runs, status="ok", **index_fields)
    path = tmp_path / "s.study.json"
    write_index(index, path)
    return path


@pytest.mark.slow  # writes three synthetic recordings
def test_scale_out_priced_as_one_gpu_boxes_from_cost(tmp_path):
    f = study_figures(_study(tmp_path, slo=None), {1: 3.0})
    out = next(c for c in f.configs if c.variant == "1x*2")
    assert (out.units, out.gpu, out.cost_per_hour) == (2, True, pytest.approx(6.0))
    assert "2 one-GPU boxes at $3/hr each" in out.cost_basis
    assert out.efficiency_peak == pytest.approx(1.0)  # 400/s over 2 GPUs against 200/s on one
    # the marginal gain and "stop at" weigh GPUs added to one server only
    assert [(s.from_variant, s.to_variant) for s in f.steps] == [("1x", "2x")] and f.stop.variant in ("1x", "2x")
    (scale,) = f.scale
    assert scale.up is not None and scale.up.variant == "2x" and scale.up.cost_per_hour == pytest.approx(8.0)
    assert scale.answer.choice == SCALE_OUT  # $6/hr for 400/s against $8/hr for 360/s
    assert scale.answer.line == ("at the peak: 2 boxes of 1x H200: 400.0 images/s at $0.00417/1000; "
                                 "1 box of 2x H200: 360.0 images/s at $0.00617/1000 → scale out")


@pytest.mark.slow  # writes three synthetic recordings
def test_the_price_of_a_one_gpu_profile_and_the_slo_point(tmp_path):
    # dearer one-GPU boxes ($5/hr each): the one 2-GPU box wins at the latency target
    f = study_figures(_study(tmp_path, scale_out_price=5.0, scale_out_price_from="hardware.cost_per_hour of 1x_h200"))
    (scale,) = f.scale
    assert "2 boxes at $5/hr each (hardware.cost_per_hour of 1x_h200)" in scale.out.cost_basis
    assert scale.answer.line.startswith("at p99 <= 100 ms: 2 boxes of 1x H200: ")
    assert scale.answer.choice == SCALE_UP


@pytest.mark.slow  # writes three synthetic recordings
def test_no_one_gpu_price_says_what_to_set(tmp_path):
    f = study_figures(_study(tmp_path, slo=None))
    (scale,) = f.scale
    assert scale.out.cost_per_hour is None and scale.answer.choice is None
    assert scale.answer.line.endswith("no price for 2 boxes of 1x H200: set --cost 1=DOLLARS (a one-GPU box's "
                                      "$/hr) or --scale-out-profile NAME (a one-GPU profile)")


@pytest.mark.slow  # writes three synthetic recordings
def test_the_report_has_both_ways_and_the_line(tmp_path):
    f = study_figures(_study(tmp_path), {1: 3.0})
    md = render_study(f, "md")
    assert "## Scale out or scale up" in md
    assert "| 1x*2 | scale out | $6.00 | 400.0 |" in md and "| 2x | scale up | $8.00 | 360.0 |" in md
    assert f"{f.scale[0].answer.line[0].upper()}{f.scale[0].answer.line[1:]}." in md
    assert "1x*2: 2 one-GPU boxes at $3/hr each" in md  # the cost basis
    assert "<h2>Scale out or scale up</h2>" in render_study(f, "html")


@pytest.mark.slow  # writes three synthetic recordings
def test_a_study_without_the_scale_up_config_of_that_size(tmp_path):
    path = _study(tmp_path, slo=None)
    data = path.read_text().replace('"variant": "2x"', '"variant": "4x"')
    path.write_text(data)
    (scale,) = study_figures(path, {1: 3.0}).scale
    assert scale.up is None and "no scale-up config of the same size in this study (add 2x to --variants)" in scale.answer.line


@pytest.mark.slow  # writes three synthetic recordings
def test_compare_a_scale_out_run_with_a_scale_up_run(tmp_path):
    study_figures(_study(tmp_path, slo=None))  # writes the recordings
    recordings = [Recording.open(tmp_path / "2x.sqlite"), Recording.open(tmp_path / "1x_2.sqlite")]
    c = compare(recordings, {1: 3.0, 2: 8.0})
    (line,) = c.scale_answers
    assert line.endswith("→ scale out") and "2 boxes of 1x H200: 400.0 images/s at $0.00417/1000" in line
    out = next(r for r in c.runs if r.summary.config_variant == "1x*2")
    assert out.label == "2 x 1x H200 (2x_h200)" and out.summary.cost_per_hour == pytest.approx(6.0)
    # each side's deciding level carries its windows: the answer's rule reads their spread
    assert len(out.peak_windows) == 3 and all(w == pytest.approx(400.0, rel=0.01) for w in out.peak_windows)
    text = render_compare(c, "md")
    assert "## Scale out or scale up" in text
    # unpriced: never the N-GPU box's price the run was recorded with
    c = compare(recordings)
    assert next(r for r in c.runs if r.summary.config_variant == "1x*2").summary.cost_per_hour is None
    assert any("set --cost 1=DOLLARS or --scale-out-profile NAME" in n for n in c.notes)
    assert c.scale_answers[0].endswith("no price for 2 boxes of 1x H200: set --cost 1=DOLLARS or "
                                       "--scale-out-profile NAME")


def test_the_study_screens_show_the_line_once_the_study_ends():
    line = "at the peak: 2 boxes of 1x H200: 400.0 images/s at $0.00417/1000; 1 box of 2x H200: ... → scale out"
    state = StudyState()
    state.apply(ev.StudyStarted(study_id="s", model="m", variants=["1x", "2x", "1x*2"], levels=[1.0], mode="concurrency",
                                server="embedded"))
    assert scale_answers(state).plain == ""
    done = ev.StudyFinished(status="ok", finished=["1x", "2x", "1x*2"], scale_answers=[line])
    state.apply(done)
    shown = scale_answers(state)
    assert shown.plain == line
    assert any(span.style == "bold" and shown.plain[span.start:span.end] == "→ scale out" for span in shown.spans)
    printer = StudyPrinter.__new__(StudyPrinter)
    assert printer._study_finished(done).endswith(f"finished 1x, 2x, 1x*2\n{line}")
    # the event round-trips (the recording and replay read it back)
    assert ev.event_from_dict(done.to_dict()).scale_answers == [line]
    assert ev.event_from_dict({**msgspec.structs.asdict(ev.StudyFinished(status="ok")), "kind": "study_finished",
                               "v": 1}).scale_answers == []


@pytest.mark.slow  # writes three synthetic recordings and replays them
def test_a_replayed_study_ends_with_the_line(tmp_path):
    path = _study(tmp_path, slo=None, costs={"1": 3.0})
    end = replayed_end(path)
    assert end.scale_answers == [study_figures(path).scale[0].answer.line]
    assert end.scale_answers[0].endswith("→ scale out")


@pytest.mark.slow  # writes two synthetic recordings
def test_servers_sharing_a_smaller_boxs_gpu_get_no_efficiency(tmp_path):
    runs = []
    for k, variant in enumerate(("1x", "1x*2")):
        run = SyntheticRun(gpu_model="H200", gpu_count=1, variant=variant, profile_name="1x_h200", cost_per_hour=3.5,
                           levels=[1, 4, 16], capacity_per_gpu_ips=200.0, base_latency_s=0.02, probe=False,
                           telemetry_hz=1.0, t0=1_771_169_400.0 + 10_000 * k)
        path = record_events(tmp_path / f"{variant.replace('*', '_')}.sqlite", synthetic_session(run))
        runs.append(VariantRun(variant, path.name, "ok", 0))
    index = StudyIndex(study_id="s", profile="1x_h200", model="openclip_vit_b32", variants=["1x", "1x*2"],
                       server="embedded", slo=None, runs=runs, status="ok")
    write_index(index, tmp_path / "s.study.json")
    figures = study_figures(tmp_path / "s.study.json")
    one, two = figures.configs
    assert (one.shared_gpus, two.shared_gpus) == (None, 1)
    assert one.efficiency_peak == pytest.approx(1.0) and two.efficiency_peak is None
    md = render_study(figures, "md")
    assert "| 1x*2 | 2 (on 1) |" in md
    assert "1x*2: its 2 servers shared this box's 1 GPU(s)" in md
