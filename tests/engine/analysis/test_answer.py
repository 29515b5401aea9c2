"""The one rule behind every headline figure: only sound levels decide, and "not decided" says why."""

from __future__ import annotations

import pytest

from engine import events as ev
from engine.analysis.answer import AnswerFold, answer_of, decide, is_sound, standing
from engine.analysis.contention import LevelFigures, is_contended, out_of_line, spread
from engine.analysis.gates import GATE_FAILURE_EXIT_CODE, Unjudged, evaluate_gates, gate_exit_code
from engine.analysis.slo import parse_slo
from engine.analysis.study import ConfigPoint, marginal_steps, stop_at
from engine.profiles import Gates


def result(level: float, ips: float, p99_ms: float, status: str = "stable", index: int | None = None,
           trial: int = 1, remeasure: str = "", others: float | None = None) -> ev.LevelResult:
    lat = ev.LatencyStats(count=100, mean=p99_ms / 2000, p50=p99_ms / 2000, p95=p99_ms / 1200, p99=p99_ms / 1000)
    return ev.LevelResult(mode="concurrency", level=level, index=int(level) if index is None else index, status=status,
                          batch_size=1, windows=3, merged_windows=3, requests=100, errors=0, throughput_rps=ips,
                          throughput_ips=ips, latency=lat, trial=trial, remeasure=remeasure, others_cpu=others)


def test_the_newcomers_study_an_unstable_level_below_does_not_veto_a_stable_one() -> None:
    """c=1 unstable with p99 308 ms vetoed a stable c=4 (p99 20 ms, 320 img/s): the SLO point
    ignores an unsound level below a sound one that meets the target."""
    levels = [result(1, 40, 308, "unstable", trial=3), result(4, 320, 20), result(8, 330, 80)]
    a = decide(levels, parse_slo("p99=50ms"), cost_per_hour=1.0)
    assert a.slo_level is not None and a.slo_level.level == 4 and a.slo_bounded
    assert a.not_decided == ""
    assert a.line.startswith("answer: at p99 <= 50 ms, CPU: 320.0 images/s at concurrency 4, $0.000868 per 1000, stable")
    assert a.line.endswith("stable (1 level re-measured; 1 of 3 levels unstable, left out)")
    assert a.details == ["left out: concurrency 1 unstable after 3 trials"]  # each level's reason stands above the line
    assert a.remeasured == 1


def test_no_sound_level_is_not_decided_and_says_why() -> None:
    levels = [result(1, 40, 308, "contended", trial=3, others=0.6), result(4, 320, 20, "unstable", trial=3)]
    a = decide(levels, parse_slo("p99=50ms"))
    assert a.best is None and a.slo_level is None and a.cost_per_1000 is None
    assert a.line == ("answer: not decided: 2 of 2 levels not sound (1 contended, 1 unstable; others 60 % of the CPU); "
                      "measure on a quieter box")
    assert a.not_decided == ("no sound level: concurrency 1 contended after 3 trials (others took 60 % of "
                             "the CPU); concurrency 4 unstable after 3 trials; measure again on a quieter box, or with "
                             "more windows (load.max_windows) or trials (load.max_trials)")
    assert a.details == ["left out: concurrency 1 contended after 3 trials (others took 60 % of the CPU)",
                         "left out: concurrency 4 unstable after 3 trials",
                         "measure again on a quieter box, or with more windows (load.max_windows) or trials "
                         "(load.max_trials)"]


@pytest.mark.parametrize(("levels", "line"), [
    # the newcomer's box: every level contended, others' share as a range
    ([result(c, 100, 9, "contended", others=o) for c, o in
      ((1, 0.77), (2, 0.80), (4, 0.81), (8, 0.85), (16, 0.79), (32, 0.82), (64, 0.78))],
     "answer: not decided: 7 of 7 levels contended (others 77–85 % of the CPU); measure on a quieter box"),
    # unstable on a quiet box: more windows or trials, not a quieter box
    ([result(1, 40, 9, "unstable", trial=3), result(2, 80, 9, "unstable", trial=3)],
     "answer: not decided: 2 of 2 levels unstable; measure with more windows or trials"),
    # one stable level cannot be the SLO point: the levels below it are the ones that could have been
    ([result(1, 40, 30, "unstable", others=0.2), result(2, 60, 35, "unstable"), result(4, 320, 90)],
     "answer: not decided: no sound level meets p99 <= 50 ms; below the sound ones 2 of 3 levels unstable "
     "(others 20 % of the CPU); measure on a quieter box"),
    # failed levels are results, not noise
    ([result(1, 0, 0, "failed"), result(2, 0, 0, "failed")], "answer: not decided: every level failed"),
])
def test_the_not_decided_line_summarizes_the_levels(levels: list[ev.LevelResult], line: str) -> None:
    a = decide(levels, parse_slo("p99=50ms"))
    assert a.line == line and len(a.line) <= 160
    assert len(a.details) == len(a.left_out) + (1 if a.left_out else 0)


def test_a_contended_level_is_never_the_peak_even_with_the_most_throughput() -> None:
    a = decide([result(1, 100, 5), result(4, 900, 9, "contended", others=0.7), result(8, 200, 12)], gpus=2,
               cost_per_hour=3.6)
    assert a.best is not None and a.best.level == 8
    assert a.line.startswith("answer: peak, 2 GPUs: 200.0 images/s at concurrency 8 (p99 12.0 ms), $0.00500 per 1000")
    assert a.line.endswith("stable (0 levels re-measured; 1 of 3 levels contended, left out)")
    assert a.details == ["left out: concurrency 4 contended (others took 70 % of the CPU)"]


def test_when_the_only_levels_that_could_meet_the_target_are_unsound_it_is_not_decided() -> None:
    a = decide([result(1, 40, 30, "unstable"), result(4, 320, 90)], parse_slo("p99=50ms"))
    assert a.slo_level is None
    assert a.not_decided.startswith("no sound level meets p99 <= 50 ms, and the levels that could have are not sound: "
                                    "concurrency 1 unstable")
    # every sound level misses and no unsound one lies below: that is an answer, and says so
    b = decide([result(1, 40, 90), result(4, 320, 120)], parse_slo("p99=50ms"))
    assert b.not_decided.startswith("no level meets p99 <= 50 ms")


def test_a_later_trial_stands_and_a_superseded_one_is_not_sound() -> None:
    first = result(4, 900, 9, "unstable", remeasure="its windows did not agree")
    second = result(4, 300, 9, trial=2)
    assert not is_sound(first) and is_sound(second)
    one = result(1, 100, 5)
    assert standing([one, first, second]) == [one, second]
    a = decide([one, first, second])
    assert a.best is second and a.remeasured == 1
    # a superseded trial published with its reason is never sound, even when stable
    assert not is_sound(result(4, 900, 9, remeasure="throughput fell 40 % from level 1"))


def test_the_fold_gives_what_decide_gives_and_a_new_sweep_starts_over() -> None:
    started = ev.SessionStarted(session_id="s", profile_name="p", mode="sweep",
                                profile={"hardware": {"cost_per_hour": 2.0, "gpu_count": 4}, "model": {"variant": "2x"}})
    sweep_one = [ev.LevelStarted(mode="concurrency", level=1, index=0, total=2), result(1, 100, 5),
                 ev.LevelStarted(mode="concurrency", level=4, index=1, total=2), result(4, 300, 9, index=1)]
    again = [ev.LevelStarted(mode="concurrency", level=4, index=1, total=2, trial=2), result(4, 280, 9, index=1, trial=2)]
    fold = AnswerFold()
    for e in [started, *sweep_one, *again, ev.SweepFinished(levels=2, stable=2, failed=0)]:
        fold.apply(e)
    a = fold.answer()
    assert a.best is not None and a.best.throughput_ips == 280 and a.gpus == 2 and a.cost_per_hour == 2.0
    assert a.line == decide([*[e for e in sweep_one if isinstance(e, ev.LevelResult)], again[1]], cost_per_hour=2.0,
                            gpus=2).line
    # a second sweep in the session: index 0, first trial
    fold.apply(ev.LevelStarted(mode="concurrency", level=1, index=0, total=1))
    fold.apply(result(1, 50, 5, index=0))
    assert fold.answer().best is not None and fold.answer().best.throughput_ips == 50  # type: ignore[union-attr]
    assert answer_of([started, *sweep_one]).best is sweep_one[-1]


def test_contention_and_out_of_line_rules() -> None:
    assert is_contended(0.6, 0.0, 50.0) and not is_contended(0.3, 0.1, 50.0) and is_contended(0.3, 0.25, 50.0)
    assert not is_contended(None, None, 10.0) and not is_contended(1.0, 0.5, 100.0)
    assert spread([100, 110, 90]) == pytest.approx(0.2)
    below, this = LevelFigures(1, 100, 0.010, 0.02), LevelFigures(4, 60, 0.012, 0.02)
    assert out_of_line(below, this, 10.0)[0] == "this"  # throughput fell 40 % while the load rose
    assert out_of_line(LevelFigures(1, 100, 0.300, 0.02), LevelFigures(4, 320, 0.020, 0.02), 10.0)[0] == "below"
    assert out_of_line(LevelFigures(1, 100, 0.010, 0.5), LevelFigures(4, 60, 0.012, 0.5), 10.0) == ("", "")  # within spread


def test_gates_are_judged_on_sound_levels_and_an_unjudged_gate_exits_2() -> None:
    levels = [result(1, 100, 5), result(4, 900, 60, "unstable")]
    failures = evaluate_gates(Gates(min_throughput=500.0, max_p99_ms={"4": 50.0}), levels)
    assert failures[0] == "min_throughput: best 100/s (at 1) < 500/s"  # the unstable 900 is no pass
    assert isinstance(failures[1], Unjudged) and "not decided: concurrency 4 unstable" in failures[1]
    assert gate_exit_code(failures) == GATE_FAILURE_EXIT_CODE
    unjudged = evaluate_gates(Gates(max_p99_ms={"4": 50.0, "16": 50.0}), levels)
    assert len(unjudged) == 2 and gate_exit_code(unjudged) == 2
    assert gate_exit_code(evaluate_gates(Gates(min_efficiency=0.8), [], None)) == 2
    assert gate_exit_code([]) == 0


def test_stop_at_says_not_decided_never_no_usable_result_for_a_noisy_config() -> None:
    cpu = ConfigPoint("cpu", 1, None, not_decided="no sound level: concurrency 1 unstable after 3 trials")
    assert stop_at([cpu], "CPU instance").reason == "not decided: cpu: no sound level: concurrency 1 unstable after 3 trials"
    two = stop_at([cpu, ConfigPoint("cpu2", 2, 500.0)], "CPU instance")
    assert "gave no usable result" not in two.reason and "cpu not decided (no sound level" in two.reason


def test_stop_at_a_failed_config_is_not_decided() -> None:
    # 2x lost a server: "stop at 1 GPU" would let 1x win by it
    failed = ConfigPoint("2x", 2, 900.0, failed="2x failed (server exited)")
    verdict = stop_at([ConfigPoint("1x", 1, 1000.0), failed])
    assert (verdict.variant, verdict.reason) == (None, "not decided: 2x failed (server exited)")
    # below the others too: the step from it is not known
    verdict = stop_at([ConfigPoint("1x", 1, None, failed="1x failed (refused)"), ConfigPoint("2x", 2, 1900.0)])
    assert verdict.variant is None and verdict.reason == "not decided: 1x failed (refused)"
    steps = marginal_steps([ConfigPoint("1x", 1, 1000.0), failed])
    assert [(s.gain_per_unit, s.marginal) for s in steps] == [(None, None)]
