"""The sweep's time left (engine/analysis/time_left.py): event sequences -> (low, likely, high),
worked by hand from the rule in the module's docstring."""

from __future__ import annotations

import pytest

from engine import events as ev
from engine.analysis.time_left import (
    TICK_MAX_S,
    Plan,
    StudyPlan,
    TimeLeft,
    study_time_left,
    time_left,
    time_left_parts,
    time_left_words,
)
from tests.structs import replace

# 1 s warm-up, 2 s windows, stable after 3, at most 6; 3 trials, 120 s of re-measuring; a window's
# ceiling is 2 + 10 + 2 x 0.25 = 12.5 s
PLAN = Plan(warmup_s=1.0, window_s=2.0, stable_windows=3, max_windows=6, max_trials=3, trial_budget_s=120.0,
            request_timeout_s=10.0)
LAT = ev.LatencyStats(count=1, mean=0.001)
AUDIT = ev.ClientAudit()


def started(index: int, ts: float, trial: int = 1, total: int = 3) -> ev.LevelStarted:
    return ev.LevelStarted(mode="concurrency", level=index + 1, index=index, total=total, workers=1, trial=trial, ts=ts)


def window(index: int, start: float, end: float, warmup: bool = False, stable: bool = False,
           requests: int = 10, errors: int = 0) -> ev.WindowResult:
    return ev.WindowResult(level=index + 1, index=0, warmup=warmup, t_start=start, t_end=end, requests=requests,
                           errors=errors, throughput_rps=1.0, throughput_ips=1.0, latency=LAT, audit=AUDIT,
                           stable_so_far=stable, ts=end)


def result(index: int, ts: float, trial: int = 1, remeasure: str = "") -> ev.LevelResult:
    return ev.LevelResult(mode="concurrency", level=index + 1, index=index, status="stable", batch_size=1, windows=3,
                          merged_windows=3, requests=30, errors=0, throughput_rps=1.0, throughput_ips=1.0, latency=LAT,
                          trial=trial, remeasure=remeasure, ts=ts)


def level(index: int, t: float, windows: int = 3, length: float = 2.0, trial: int = 1, remeasure: str = "",
          setup: float = 0.5) -> tuple[list[ev.Event], float]:
    """A whole trial from ``t``: 1 s warm-up, ``windows`` windows of ``length``, its result
    ``setup`` s after the last; returns its events and the time of its result."""
    out: list[ev.Event] = [started(index, t, trial), window(index, t, t + 1.0, warmup=True)]
    end = t + 1.0
    for w in range(windows):
        out.append(window(index, end, end + length, stable=w == windows - 1 and not remeasure))
        end += length
    out.append(result(index, end + setup, trial, remeasure))
    return out, end + setup


FIRST, T1 = level(0, 0.0)  # 0 -> 7.5: setup 0.5 s measured
# a second level started at 8 (0.5 s after the first's result), one 2 s window in, at 11
SECOND_RUNNING = [*FIRST, started(1, 8.0), window(1, 8.0, 9.0, warmup=True), window(1, 9.0, 11.0)]
CAP = 2.0 + 10.0 + 2 * TICK_MAX_S
# setups measured: 7.5 - 0 - 1 - 6 = 0.5 -> ceiling 2 x 0.5 = 1 s per trial
TRIAL_CAP = 1.0 + 6 * CAP + 1.0


@pytest.mark.parametrize(("events", "now", "expected"), [
    # nothing started: no figure
    ([], 0.0, None),
    # the first level's warm-up: 3 levels at their least, no ceiling yet (no setup measured)
    ([started(0, 0.0)], 0.0, TimeLeft(3 * 7.0, 3 * 7.0, None)),
    # one window of it at the plan's length, at its end: 2 levels + 2 windows
    ([started(0, 0.0), window(0, 0.0, 1.0, warmup=True), window(0, 1.0, 3.0)], 3.0, TimeLeft(18.0, 18.0, None)),
    # the window stretched to 6 s: the low end keeps the plan's floor; the pace is 6 s a window
    ([started(0, 0.0), window(0, 0.0, 1.0, warmup=True), window(0, 1.0, 7.0)], 7.0,
     TimeLeft(18.0, 2 * (1.0 + 3 * 6.0) + 2 * 6.0, None)),
    # the second level, 1 window in: 1 level + 2 windows at least; likely the same at the measured
    # pace plus the first level's setup and tail (0.5 s each); the ceiling: 5 windows at their cap,
    # a setup, the last level, and re-trials up to the budget and one trial more
    (SECOND_RUNNING, 11.0, TimeLeft(7.0 + 4.0, 7.5 + 4.0 + 0.5, 5 * CAP + 1.0 + TRIAL_CAP + 120.0 + TRIAL_CAP)),
    # 1.5 s later, still in that window: everything counts down by 1.5 s
    (SECOND_RUNNING, 12.5, TimeLeft(7.0 + 2.5, 7.5 + 2.5 + 0.5, 5 * CAP - 1.5 + 1.0 + TRIAL_CAP + 120.0 + TRIAL_CAP)),
    # a window still open past its expected end: the low end still counts the window after it,
    # and the likely figure is no less
    (SECOND_RUNNING, 16.0, TimeLeft(7.0 + 2.0, 7.0 + 2.0, 5 * CAP - 5.0 + 1.0 + TRIAL_CAP + 120.0 + TRIAL_CAP)),
])
def test_time_left_from_events(events, now, expected):
    got = time_left(PLAN, events, now)
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert got.low_s == pytest.approx(expected.low_s)
    assert got.likely_s == pytest.approx(expected.likely_s)
    assert (got.high_s is None) == (expected.high_s is None)
    if expected.high_s is not None:
        assert got.high_s == pytest.approx(expected.high_s)


def test_a_window_that_decides_the_level_leaves_only_its_end():
    """The stable window ends the level: no further window is counted, at least or at most."""
    events = [*FIRST[:-1]]  # the first level's stable window, its result not yet published
    got = time_left(PLAN, events, 7.0)
    assert got is not None and got.low_s == pytest.approx(2 * 7.0)
    failed = [started(0, 0.0), window(0, 0.0, 1.0, warmup=True), window(0, 1.0, 3.0, requests=0, errors=5)]
    got = time_left(PLAN, failed, 3.0)
    assert got is not None and got.low_s == pytest.approx(2 * 7.0)


def test_an_announced_trial_counts_between_trials():
    """A result that says the level is measured again: its next trial is at least one level's least."""
    first, end = level(0, 0.0, windows=6, remeasure="its windows did not agree")
    got = time_left(PLAN, first, end)
    assert got is not None and got.low_s == pytest.approx(7.0 + 2 * 7.0)


def test_the_spent_budget_limits_the_ceiling_of_re_trials():
    """Re-measuring past trial_budget_s is not allowed: once spent, no re-trial is counted."""
    plan = Plan(1.0, 2.0, 3, 6, 3, trial_budget_s=10.0, request_timeout_s=10.0)
    first, t = level(0, 0.0, windows=6, remeasure="its windows did not agree")
    again, t = level(0, t + 0.5, windows=6, trial=2)  # 13.5 s: the 10 s budget is spent
    events = [*first, *again, started(1, t + 0.5)]
    got = time_left(plan, events, t + 0.5)
    assert got is not None and got.high_s is not None
    setup_cap = 2 * max(13.5 - 0 - 1 - 12, t - 13.5 - 1 - 12)
    trial_cap = 1.0 + 6 * CAP + setup_cap
    # the new level: its warm-up (1 s), 6 windows at their cap and a setup; one more level after it
    assert got.high_s == pytest.approx(1.0 + 6 * CAP + setup_cap + trial_cap)


def test_the_ceiling_never_rises_within_a_level_as_windows_stretch():
    """What was printed holds: windows of 2, 4, 8 s (up to the cap) lower the ceiling or keep it,
    while the likely figure moves at every window."""
    events: list[ev.Event] = [*SECOND_RUNNING]
    t = 11.0
    highs, likelies = [], []
    for length in (4.0, 8.0, 12.0):
        events.append(window(1, t, t + length))
        t += length
        got = time_left(PLAN, events, t)
        assert got is not None and got.high_s is not None
        highs.append(got.high_s)
        likelies.append(got.likely_s)
    assert highs == sorted(highs, reverse=True)
    # the pace is this level's windows: 3, 4 then 6 s a window
    assert likelies == pytest.approx([(1 + 3 * 3 + 0.5) + 3 + 0.5, (1 + 3 * 4 + 0.5) + 4 + 0.5,
                                      (1 + 3 * 6 + 0.5) + 6 + 0.5])


def test_a_finished_sweep_has_no_time_left():
    assert time_left(PLAN, [*FIRST, ev.SweepFinished(levels=1, stable=1, failed=0, ts=8.0)], 8.0) is None


@pytest.mark.parametrize(("t", "words"), [
    (TimeLeft(40.9, 70.0, 199.1), "≈1m10s left (40s–3m20s)"),
    (TimeLeft(40.9, 70.0, None), "≈1m10s left (at least 40s)"),
    (TimeLeft(40.0, 70.0, 3600.5), "≈1m10s left (40s–1h01m)"),  # past an hour, whole minutes, up
])
def test_words_round_the_low_end_down_and_the_high_end_up(t, words):
    assert time_left_words(t) == words
    assert time_left_parts(t) == tuple(words.removesuffix(")").split(" (", 1))


def test_the_window_cap_is_the_sweeps():
    from engine.load.sweep import TICK_NS

    assert TICK_MAX_S == TICK_NS / 1e9


def test_a_study_counts_the_running_sweep_and_each_config_waiting():
    """The whole study by the sweep's rule: the running config's sweep, each waiting config at
    the least and at the most the plan allows, and the configs' time outside their sweeps."""
    study = StudyPlan(PLAN, levels=3)
    sweep = time_left(PLAN, SECOND_RUNNING, 11.0)
    assert sweep is not None and sweep.high_s is not None
    # no config finished yet: its time outside the sweep (server start, stop) is not measured
    first = study_time_left(study, SECOND_RUNNING, [], 11.0, configs_waiting=1, overheads=[],
                            likely=None)
    assert first == TimeLeft(sweep.low_s + 3 * 7.0, sweep.low_s + 3 * 7.0, None)
    # one config finished, 3 s outside its sweep: twice that for this one, the waiting one and the
    # study's close; the waiting one's sweep at its ceiling (3 levels, re-trials within the budget)
    whole = 3 * TRIAL_CAP + 120.0 + TRIAL_CAP
    got = study_time_left(study, SECOND_RUNNING, [], 11.0, 1, [3.0], likely=50.0)
    assert got.low_s == pytest.approx(sweep.low_s + 21.0) and got.likely_s == 50.0
    assert got.high_s == pytest.approx(sweep.high_s + whole + 3 * 6.0)
    # between configs: the last sweep's pace for the one waiting
    got = study_time_left(study, None, FIRST, 8.0, 1, [3.0], likely=None)
    assert got.low_s == pytest.approx(21.0) and got.high_s == pytest.approx(whole + 2 * 6.0)


def test_a_study_counts_the_search_levels_at_most():
    """The latency-target search may add levels to each sweep: none at least, all at most."""
    searching = StudyPlan(PLAN, levels=3, search_steps=2)
    sweep = time_left(PLAN, SECOND_RUNNING, 11.0, more_levels=2)
    got = study_time_left(searching, SECOND_RUNNING, [], 11.0, 0, [3.0], likely=None)
    assert sweep is not None and sweep.high_s is not None
    assert got.low_s == pytest.approx(sweep.low_s) and got.high_s == pytest.approx(sweep.high_s + 2 * 6.0)
    plain = time_left(PLAN, SECOND_RUNNING, 11.0)
    assert plain is not None and plain.high_s is not None and sweep.high_s > plain.high_s + 2 * TRIAL_CAP - 1e-6


def test_after_the_last_result_the_ceiling_keeps_the_sweeps_close():
    """Every level measured, no re-trial possible: what is left is the sweep's close (stopping
    the load workers), counted like a trial's setup, twice the most measured."""
    plan = replace(PLAN, max_trials=1)
    events = [replace(e, total=1) if isinstance(e, ev.LevelStarted) else e for e in FIRST]
    got = time_left(plan, events, T1)
    assert got == TimeLeft(0.0, 0.0, 2 * 0.5)


def test_an_absurd_plan_is_not_known_rather_than_infinite():
    """A recorded warm-up of 1e308 s makes the sum infinite: no figure, never 'inf' or a crash."""
    absurd = replace(PLAN, warmup_s=1e308, window_s=1e308)
    assert time_left(absurd, [started(0, 0.0)], now=0.5) is None
    huge_timeout = replace(PLAN, request_timeout_s=float("inf"))
    left = time_left(huge_timeout, FIRST + [started(1, T1)], now=T1 + 0.5)
    assert left is not None and left.high_s is None  # a ceiling past any time is no ceiling
