"""A config that failed, lost a server or was refused decides nothing: the study's scale-out line,
its "stop at", its costs, its answer line, its report, its replay and compare all say "not decided"
and name it, from synthetic recordings (written through the real Recorder): 1x, 2x and 1x*2 on a
2-GPU box, at p99 <= 50 ms."""


import pytest

from engine import events as ev
from engine.analysis.scale_out import SCALE_UP
from engine.record.compare import compare
from engine.record.reader import Recording
from engine.study.figures import answer_line, scale_answer_lines, study_answer_line, study_figures
from engine.study.index import StudyIndex, VariantRun, write_index
from engine.study.study_report import render_study
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.engine.study.replayed_end import replayed_end
from tests.structs import replace

DIED = ("1 level(s) degraded, missing an endpoint (level 8: ep2 answered nothing in 3 of 3 measured windows); "
        "server 2 of 2 (GPU 1) (ep2, http://127.0.0.1:8010) exited (tritonserver killed by SIGSEGV (signal 11))")
REFUSED = ("endpoints are not apples-to-apples: model config differs in instance_group: ep1 [{'count': 1}], "
           "ep2 [{'count': 2}] (--allow-mixed measures them together anyway)")
# p99 = 1.6 x the base latency at low load: 1x and 2x meet 50 ms, 1x*2 meets no level (as in the issue)
BASE_LATENCY = {"1x": 0.02, "2x": 0.02, "1x*2": 0.05}


def _events(variant: str, k: int, failed: str | None) -> list[ev.Event]:
    run = SyntheticRun(gpu_model="H200", gpu_count=2, variant=variant, profile_name="2x_h200", cost_per_hour=8.0,
                       levels=[1, 4, 8, 16], capacity_per_gpu_ips=200.0, base_latency_s=BASE_LATENCY[variant],
                       probe=False, telemetry_hz=1.0, t0=1_771_169_400.0 + 10_000 * k)
    events = synthetic_session(run)
    if failed:
        events = [replace(e, status="failed", exit_code=1, error=failed) if isinstance(e, ev.SessionEnded) else e
                  for e in events]
    return events


def _study(tmp_path, failed: dict[str, tuple[int, str]], unrecorded: tuple[str, ...] = ()):
    """1x, 2x, 1x*2; ``failed``: variant -> (exit code, error); ``unrecorded``: refused before any recording."""
    runs = []
    for k, variant in enumerate(BASE_LATENCY):
        code, error = failed.get(variant, (0, None))
        if variant in unrecorded:
            runs.append(VariantRun(variant, None, "failed", code, error, "embedded"))
            continue
        path = record_events(tmp_path / f"{variant.replace('*', '_')}.sqlite", _events(variant, k, error))
        runs.append(VariantRun(variant, path.name, "failed" if error else "ok", code, error, "embedded"))
    index = StudyIndex(study_id="s", profile="2x_h200", model="openclip_vit_b32", variants=list(BASE_LATENCY),
                       server="embedded", slo="p99=50ms", costs={"1": 3.0}, runs=runs,
                       status="failed" if failed else "ok")
    path = tmp_path / "s.study.json"
    write_index(index, path)
    return path


@pytest.mark.slow  # writes three synthetic recordings
def test_a_scale_out_config_that_ran_fine_and_met_no_level_loses(tmp_path):
    # the control: the same figures, 1x*2's run ended ok, so scale up wins
    f = study_figures(_study(tmp_path, {}))
    (scale,) = f.scale
    assert scale.answer.choice == SCALE_UP
    assert scale.answer.line.endswith("→ scale up (only 1 box of 2x H200 meets p99 <= 50 ms)")
    assert answer_line(f).startswith("answer: at p99 <= 50 ms, stop at 2 GPUs (2x): ")


@pytest.mark.slow  # writes three synthetic recordings
def test_a_scale_out_config_that_lost_a_server_decides_nothing(tmp_path):
    path = _study(tmp_path, {"1x*2": (1, DIED)})
    f = study_figures(path)
    why = f"1x*2 failed ({DIED[:158]}…)"
    assert f.failed == {"1x*2": why}
    (scale,) = f.scale
    assert scale.answer.choice is None
    assert scale.answer.line.startswith("at p99 <= 50 ms: 2 boxes of 1x H200: failed; 1 box of 2x H200: ")
    assert scale.answer.line.endswith(f"→ not decided: {why}")
    out = scale.out
    assert out is not None and out.failed == why
    # its figures stay as measured; nothing priced or compared comes from them
    assert out.peak_throughput is not None
    assert (out.cost_peak, out.cost_slo, out.efficiency_peak, out.deciding_throughput, out.deciding_cost) == (
        None, None, None, None, None)
    # a long failure stands in full in the recommendation above; the line names the config
    assert answer_line(f) == "answer: not decided: 1x*2 failed"
    assert "\n" not in answer_line(f)
    # the one-server configs' own stop still holds, and the report says both
    assert f.stop.variant == "2x"
    md = render_study(f, "md")
    assert md.splitlines()[2] == "answer: not decided: 1x*2 failed"
    assert f"Not decided: {why}; among the one-server configs alone: stop at 2 GPUs" in md
    assert "| 1x*2 (failed) | scale out | $6.00 |" in md
    assert f"1x*2 failed ({DIED[:158]}…): it decides nothing" in md
    # every surface reads the same: the study's end lines (live and replayed) and compare
    assert scale_answer_lines(path) == [scale.answer.line]
    assert study_answer_line(path) == answer_line(f)
    recordings = [Recording.open(tmp_path / "2x.sqlite"), Recording.open(tmp_path / "1x_2.sqlite")]
    (line,) = compare(recordings, {1: 3.0, 2: 8.0}).scale_answers
    assert line.endswith(f"→ not decided: {why}") and "2 boxes of 1x H200: failed" in line


@pytest.mark.slow  # writes two synthetic recordings
def test_a_scale_out_config_refused_before_any_recording_still_has_its_line(tmp_path):
    path = _study(tmp_path, {"1x*2": (2, REFUSED)}, unrecorded=("1x*2",))
    f = study_figures(path)
    (scale,) = f.scale
    assert (scale.variant, scale.out, scale.up is not None) == ("1x*2", None, True)
    assert scale.answer.choice is None
    assert scale.answer.line.startswith("at p99 <= 50 ms: 2 boxes of 1x H200: failed; 1 box of 2x H200: ")
    assert scale.answer.line.endswith(f"→ not decided: 1x*2 failed ({REFUSED})")
    assert answer_line(f) == "answer: not decided: 1x*2 failed"  # the refusal in full above it
    assert scale_answer_lines(path) == [scale.answer.line]
    assert "| 1x*2 (failed) | scale out | - |" in render_study(f, "md")


@pytest.mark.slow  # writes three synthetic recordings
def test_a_scale_up_config_that_failed_leaves_stop_at_and_the_scale_line_not_decided(tmp_path):
    f = study_figures(_study(tmp_path, {"2x": (1, "2 of 4 levels failed")}))
    assert f.stop.variant is None and f.stop.reason == "not decided: 2x failed (2 of 4 levels failed)"
    assert [(s.to_variant, s.gain_per_unit) for s in f.steps] == [("2x", None)]
    (scale,) = f.scale
    # 1x*2 met no level, 2x failed: "scale up" would rest on the failed run
    assert scale.answer.choice is None and scale.answer.line.endswith("→ not decided: 2x failed (2 of 4 levels failed)")
    assert answer_line(f) == "answer: not decided: 2x failed (2 of 4 levels failed)"
    two = next(c for c in f.configs if c.variant == "2x")
    assert two.efficiency_peak is None and two.cost_peak is None


@pytest.mark.slow  # writes three synthetic recordings and replays them
def test_a_replayed_study_ends_not_decided(tmp_path):
    path = _study(tmp_path, {"1x*2": (1, DIED)})
    end = replayed_end(path)
    f = study_figures(path)
    assert end.scale_answers == [f.scale[0].answer.line] and "→ not decided: 1x*2 failed (" in end.scale_answers[0]
    assert end.answer == answer_line(f) and end.answer == "answer: not decided: 1x*2 failed"
    assert end.exit_code == 1
