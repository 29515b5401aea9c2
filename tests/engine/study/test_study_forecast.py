"""Predict, then check, in a study: 4x predicted from 1x and 2x and printed beside the measured
4x, from synthetic recordings (written through the real Recorder) on a 4-GPU box."""

import statistics

import msgspec
import pytest

from engine import events as ev
from engine.analysis.scaling_forecast import AMDAHL
from engine.study.figures import forecast_lines, study_figures
from engine.study.index import StudyIndex, VariantRun, write_index
from engine.study.study_report import render_study
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.structs import replace
from tui.study_headless import StudyPrinter
from tui.study_state import StudyState
from tui.study_view import forecasts

# images/s per GPU at each config's peak: 1x 200, 2x 380, 4x 688 (Amdahl's σ from 1x, 2x: 0.0526,
# which predicts 690.9 for 4x)
CAPACITY = {"1x": 200.0, "2x": 190.0, "4x": 172.0}


def _study(tmp_path, unsound=(), failed=()):
    runs = []
    for k, variant in enumerate(CAPACITY):
        run = SyntheticRun(gpu_model="H100", gpu_count=4, variant=variant, profile_name="4x_h100", cost_per_hour=8.0,
                           levels=[1, 4, 8, 16, 32], capacity_per_gpu_ips=CAPACITY[variant], base_latency_s=0.02,
                           probe=False, telemetry_hz=0.5, t0=1_771_169_400.0 + 10_000 * k)
        events = synthetic_session(run)
        if variant in unsound:  # every level's windows disagreed
            events = [replace(e, status="unstable") if isinstance(e, ev.LevelResult) else e for e in events]
        path = record_events(tmp_path / f"{variant}.sqlite", events)
        runs.append(VariantRun(variant, path.name, "failed" if variant in failed else "ok", 1 if variant in failed else 0))
    index = StudyIndex(study_id="s", profile="4x_h100", model="openclip_vit_b32", variants=list(CAPACITY),
                       server="embedded", runs=runs, status="ok")
    path = tmp_path / "s.study.json"
    write_index(index, path)
    return path


@pytest.mark.slow  # writes three synthetic recordings
def test_the_4x_prediction_is_printed_beside_the_measured_4x(tmp_path):
    path = _study(tmp_path)
    f = study_figures(path)
    four = next(fc for fc in f.forecasts if fc.config == "4x")
    assert [p.config for p in four.basis] == ["1x", "2x"] and four.choice is not None
    assert four.choice.fit.law == AMDAHL and four.predicted == pytest.approx(800 / (1 + 3 * (400 / 380 - 1)))
    # each point's spread is its peak level's windows' (the synthetic windows jitter by up to 2 %)
    one = next(c for c in f.configs if c.variant == "1x")
    assert len(one.peak_windows) == 3 and four.basis[0].spread == pytest.approx(statistics.stdev(one.peak_windows))
    assert 0 < four.basis[0].spread < 0.02 * 200
    low, high = four.interval
    assert low < 688.0 < high and four.check == "inside"

    lines = forecast_lines(path)
    assert four.interval_words == f"{low:.1f}–{high:.1f}, 95 %"
    assert lines[0] == (f"forecast, scale up 4x: predicted 690.9 images/s at the peak ({four.interval_words}) from "
                        "1x, 2x; measured 688.0: inside; law: Amdahl σ 0.0526: 2x falls below linear by more than "
                        "1.96 measured sd; 2 unit counts leave the USL under-determined")
    assert lines[1].startswith("forecast, scale up 8x: predicted ") and "from 1x, 2x, 4x; not measured in this study" in lines[1]
    assert lines[2] == ("forecast, scale out: no forecast: only 1x measured: one unit count, nothing to fit "
                        "(add 1x*2 to --variants)")

    # the headless printer's end and the study screen show them as the study ends
    done = ev.StudyFinished(status="ok", finished=list(CAPACITY), forecast_lines=lines)
    printer = StudyPrinter.__new__(StudyPrinter)
    assert printer._study_finished(done) == "study ok: finished 1x, 2x, 4x\n" + "\n".join(lines)
    state = StudyState()
    state.apply(ev.StudyStarted(study_id="s", model="m", variants=list(CAPACITY), levels=[1.0], mode="concurrency",
                                server="embedded"))
    assert forecasts(state).plain == ""
    state.apply(done)
    assert forecasts(state).plain == "\n".join(lines)
    # the event round-trips; an older recording's StudyFinished has none
    assert ev.event_from_dict(done.to_dict()).forecast_lines == lines
    assert ev.event_from_dict({**msgspec.structs.asdict(ev.StudyFinished(status="ok")), "kind": "study_finished",
                               "v": 1}).forecast_lines == []

    md = render_study(f, "md")
    assert "## Predicted from the smaller configs" in md
    assert f"| scale up | 4x | 690.9 | {four.interval_words.removesuffix(', 95 %')} | 1x, 2x | Amdahl σ 0.0526 | 688.0 | inside |" in md
    assert "Predicted figures, not measured ones" in md and "Only 1x measured: one unit count" not in md
    assert "Scale out: no forecast: only 1x measured: one unit count, nothing to fit" in md


@pytest.mark.slow  # writes three synthetic recordings
def test_no_sound_level_or_a_failed_run_gives_no_point(tmp_path):
    lines = forecast_lines(_study(tmp_path, unsound=("2x",)))
    assert lines[0] == ("forecast, scale up 4x: no forecast: 2x has no sound level; only 1x measured: one unit count, "
                        "nothing to fit")
    assert "from 1x, 4x (2x has no sound level: left out)" in lines[1]
    (tmp_path / "failed").mkdir()
    lines = forecast_lines(_study(tmp_path / "failed", failed=("2x",)))
    assert lines[0] == "forecast, scale up 4x: no forecast: 2x failed; only 1x measured: one unit count, nothing to fit"
