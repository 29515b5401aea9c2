"""The time left in a sweep, as a range: the least the remaining plan needs, a likely figure, and
the most the plan allows. One rule for every surface (headless lines, the TUI's status line, a
study's progress lines and view).

Fed the sweep's own events (LevelStarted, WindowResult, LevelResult with their timestamps) and
the profile's load plan, it re-estimates at every event, within a level too, so the figure moves
while a level runs.

- low: the remaining plan at its least: each level stable after ``stable_windows`` windows of
  ``window_ms`` on its first trial, no setup time. A window is never shorter than window_ms, so
  only a run cut short (a failed level, a stop, a lost server) ends sooner.
- likely: the same plan at the pace measured so far: the latest trial's windows' length (they
  stretch until they hold min_window_requests), the windows and trials levels took, the setup
  between trials.
- high: the plan's hard limits, not the measured pace, since a slow server stretches windows past
  any pace seen: every trial runs ``max_windows`` windows of ``window_ms + request_timeout_s``
  (plus two ticks: the sweep's cap on a window, engine/load/sweep.py max_ticks); every level gets
  ``max_trials`` trials while ``trial_budget_s`` of re-measuring is left (a re-trial starts only
  within the budget, so at most one trial more than the budget is spent). The setup around a trial
  (connecting, statistics, stopping) has no cap in the plan: it is counted at twice the most
  measured so far, and until a trial has been measured no ceiling is claimed (low only: "at
  least"). Not counted: waiting for a lost server (load.server_wait_s), as its level fails at its
  first failed window, far short of that level's ceiling.

So the words never say "≤" of a pace: "≈1m10s left (40s–12m)" where the ceiling is the plan's,
"≈1m10s left (at least 40s)" where none is known yet.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine import events as ev
from engine import format as fmt
from engine.profiles import Load

TICK_MAX_S = 0.25  # the sweep's longest tick (engine/load/sweep.py TICK_NS; a test ties them)


@dataclass(frozen=True)
class Plan:
    """What the profile allows a level: its windows and trials."""

    warmup_s: float
    window_s: float
    stable_windows: int
    max_windows: int
    max_trials: int
    trial_budget_s: float
    request_timeout_s: float

    @classmethod
    def of(cls, load: Load) -> Plan:
        return cls(load.warmup_s, load.window_ms / 1000.0, load.stable_windows, load.max_windows,
                   load.max_trials, load.trial_budget_s, load.request_timeout_s)

    @property
    def window_cap_s(self) -> float:
        """A window's longest: it waits for min_window_requests until every request in flight at
        its nominal end has completed or timed out, on tick boundaries."""
        return self.window_s + self.request_timeout_s + 2 * TICK_MAX_S


@dataclass(frozen=True)
class TimeLeft:
    low_s: float
    likely_s: float
    high_s: float | None  # None: no honest ceiling yet (no trial measured)


@dataclass
class _Trial:
    index: int
    trial: int
    opened: float  # the previous trial's end (its setup starts there), else its own start
    started: float  # LevelStarted
    warm_end: float  # the warm-up's end: the first measured window starts here
    windows: list[float] = field(default_factory=list)  # measured windows' lengths
    last_end: float | None = None  # the last measured window's end
    ended: float | None = None  # LevelResult
    remeasure: bool = False  # its result said another trial follows
    decided: bool = False  # its last window ended it (stable, failed, or max_windows reached)

    @property
    def setup_s(self) -> float:
        """Time outside the plan's warm-up and windows: setup before, statistics and stop after."""
        assert self.ended is not None
        return max(0.0, self.ended - self.opened - (self.warm_end - self.started) - sum(self.windows))


def _trials(plan: Plan, events: Iterable[ev.Event]) -> tuple[list[_Trial], int]:
    """The sweep's trials in order, and its level count (the latest LevelStarted's total)."""
    trials: list[_Trial] = []
    total = 0
    for e in events:
        if isinstance(e, ev.LevelStarted):
            opened = trials[-1].ended if trials and trials[-1].ended is not None else e.ts
            trials.append(_Trial(e.index, e.trial, opened, e.ts, e.ts + plan.warmup_s))
            total = e.total
        elif not trials or trials[-1].ended is not None:
            continue
        elif isinstance(e, ev.WindowResult):
            t = trials[-1]
            if e.warmup:
                t.warm_end = max(t.warm_end, e.t_end)
            else:
                t.windows.append(max(0.0, e.t_end - e.t_start))
                t.last_end = e.t_end
                failed = e.requests == 0 and e.errors > 0
                t.decided = e.stable_so_far or failed or len(t.windows) >= plan.max_windows
        elif isinstance(e, ev.LevelResult):
            trials[-1].ended, trials[-1].remeasure = e.ts, bool(e.remeasure)
    return trials, total


@dataclass(frozen=True)
class _Pace:
    """A sweep's figures so far, for the trials and levels still to come."""

    window: float  # a measured window's length (at least window_ms)
    windows_per_trial: float
    trial: float  # a trial's likely length: warm-up, windows at the pace, setup
    trials_per_level: float
    tail: float  # from a trial's last window to its result
    trial_cap: float | None  # a trial at the plan's limits; None while no setup is measured

    @property
    def level(self) -> float:
        return self.trials_per_level * self.trial


def _pace(plan: Plan, trials: list[_Trial], earlier: list[_Trial] | None = None) -> _Pace:
    done = [t for t in trials if t.ended is not None]
    # the latest trial's measured windows: a level's windows stretch alike, and the next level is
    # more like the last than the first
    recent = next((t.windows for t in reversed(trials) if t.windows), [])
    window = max(plan.window_s, statistics.median(recent)) if recent else plan.window_s
    windows = statistics.mean(len(t.windows) for t in done) if done else plan.stable_windows
    windows = min(plan.max_windows, max(plan.stable_windows, windows))
    setups = [t.setup_s for t in done]
    cap_setups = setups + [t.setup_s for t in earlier or [] if t.ended is not None]
    tails = [t.ended - t.last_end for t in done if t.ended is not None and t.last_end is not None]
    trial = plan.warmup_s + windows * window + (statistics.mean(setups) if setups else 0.0)
    per_level = len(done) / len({t.index for t in done}) if done else 1.0
    # the setup has no cap in the plan: twice the most measured so far
    cap = plan.warmup_s + plan.max_windows * plan.window_cap_s + 2 * max(cap_setups) if cap_setups else None
    return _Pace(window, windows, trial, per_level, statistics.mean(tails) if tails else 0.0, cap)


def _retrials_cap(plan: Plan, trials: list[_Trial], levels_left: int, trial_cap: float) -> float:
    """The most re-measuring may still take: at most max_trials per level (a level below may be
    measured again after the one above it), none once trial_budget_s is spent, and a re-trial
    starts only within it. Our spans miss each trial's setup before its LevelStarted, so the
    budget left reads larger than the sweep's: this errs high."""
    last_trial: dict[int, int] = {}
    for t in trials:
        last_trial[t.index] = max(last_trial.get(t.index, 0), t.trial)
    possible = sum(plan.max_trials - n for n in last_trial.values()) + levels_left * (plan.max_trials - 1)
    spent = sum(t.ended - t.started for t in trials if t.trial > 1 and t.ended is not None)
    room = plan.trial_budget_s - spent
    return min(possible * trial_cap, room + trial_cap) if room > 0 and possible > 0 else 0.0


def time_left(plan: Plan, events: Iterable[ev.Event], now: float, more_levels: int = 0,
              earlier: Iterable[ev.Event] = ()) -> TimeLeft | None:
    """The sweep's time left at ``now`` from its events so far; None before its first level and
    once it finished (SweepFinished among the events). ``more_levels``: levels the sweep may add
    after its planned ones (a study's latency-target search): none at least, all at most.
    ``earlier``: an earlier sweep's events (a study's last config) whose setups count too."""
    events = list(events)
    if any(isinstance(e, ev.SweepFinished) for e in events):
        return None
    trials, total = _trials(plan, events)
    if not trials:
        return None
    pace = _pace(plan, trials, _trials(plan, earlier)[0])
    cur = trials[-1] if trials[-1].ended is None else None
    levels_left = max(0, total - len({t.index for t in trials}))
    least_level = plan.warmup_s + plan.stable_windows * plan.window_s

    low = levels_left * least_level
    likely = (levels_left + more_levels) * pace.level
    base = 0.0
    if cur is not None:
        base = cur.last_end if cur.last_end is not None else cur.warm_end
        if not cur.decided:
            k = len(cur.windows)
            low += max(0.0, base + plan.window_s - now) + (max(1, plan.stable_windows - k) - 1) * plan.window_s
            likely += max(0.0, base + (max(k + 1.0, pace.windows_per_trial) - k) * pace.window - now)
        likely += pace.tail + max(0.0, pace.trials_per_level - cur.trial) * pace.trial
    elif trials[-1].remeasure:  # between trials: the next trial of that level is announced
        low += least_level
        likely += pace.trial

    if pace.trial_cap is None:
        return _finite(TimeLeft(low, max(low, likely), None))
    setup_cap = pace.trial_cap - plan.warmup_s - plan.max_windows * plan.window_cap_s
    high = (levels_left + more_levels) * pace.trial_cap
    if cur is not None:
        more = 0 if cur.decided else plan.max_windows - len(cur.windows)
        high += max(0.0, base + more * plan.window_cap_s - now)
    high += setup_cap  # the running trial's end, or the sweep's close after its last result
    high += _retrials_cap(plan, trials, levels_left + more_levels, pace.trial_cap)
    return _finite(TimeLeft(low, min(max(low, likely), high), high))


def _finite(t: TimeLeft) -> TimeLeft | None:
    """None (not known) where a plan's absurd figure (a recorded warm-up of 1e308 s) made the
    estimate infinite or NaN; a ceiling past any finite time is no ceiling."""
    if not (math.isfinite(t.low_s) and math.isfinite(t.likely_s)):
        return None
    return t if t.high_s is None or math.isfinite(t.high_s) else TimeLeft(t.low_s, t.likely_s, None)


def time_left_parts(t: TimeLeft) -> tuple[str, str]:
    """("≈1m10s left", "40s–3m20s"), or (…, "at least 40s") while no ceiling is honest. The low
    end rounds down and the high end up, so that what is printed still holds."""
    likely = f"≈{fmt.duration(t.likely_s)} left"
    low = fmt.duration(math.floor(t.low_s))
    if t.high_s is None:
        return likely, f"at least {low}"
    return likely, f"{low}–{_duration_up(t.high_s)}"


def time_left_words(t: TimeLeft, where: str = "") -> str:
    """"≈1m10s left in the sweep (40s–3m20s)": ``where`` follows "left"."""
    likely, bounds = time_left_parts(t)
    return f"{likely}{where} ({bounds})"


def _duration_up(seconds: float) -> str:
    """fmt.duration, rounded up (past an hour it shows whole minutes: up to the next)."""
    up = math.ceil(seconds)
    return fmt.duration(math.ceil(up / 60) * 60 if up >= 3600 else up)


@dataclass(frozen=True)
class StudyPlan:
    """A study: every config runs the same sweep, its planned levels then up to search_steps
    levels of the latency-target search."""

    plan: Plan
    levels: int
    search_steps: int = 0


def study_time_left(study: StudyPlan, current: list[ev.Event] | None, last: list[ev.Event], now: float,
                    configs_waiting: int, overheads: list[float], likely: float | None) -> TimeLeft | None:
    """The whole study's time left by the sweep's rule: the running config's sweep (``current``:
    its events; None while no config runs), then each config still waiting at the pace of the
    latest sweep (``last``: the last finished config's events; their setups count for the running
    one's ceiling too). ``overheads``: each finished config's time outside its sweep (server
    start, box check, stop), counted at twice the most measured for the running config, each
    waiting one and the study's close; no ceiling before one config finished. ``likely``: the
    caller's pace, kept within the range."""
    plan = study.plan
    least_sweep = study.levels * (plan.warmup_s + plan.stable_windows * plan.window_s)
    ran = _trials(plan, current or [])[0]
    before = _trials(plan, last)[0]
    pace = _pace(plan, ran, before) if any(t.ended is not None for t in ran) else _pace(plan, before)
    whole_cap: float | None = None
    if pace.trial_cap is not None:
        n = study.levels + study.search_steps
        whole_cap = n * pace.trial_cap + min(n * (plan.max_trials - 1) * pace.trial_cap,
                                             plan.trial_budget_s + pace.trial_cap)
    low, high = 0.0, whole_cap
    if current is not None:
        searched = {e.index for e in current if isinstance(e, ev.LevelStarted) and e.index >= study.levels}
        sweep = time_left(plan, current, now, max(0, study.search_steps - len(searched)), last)
        if sweep is not None:
            low, high = sweep.low_s, sweep.high_s
        elif not any(isinstance(e, ev.SweepFinished) for e in current):  # its server is starting
            low = least_sweep
        else:
            high = 0.0
    else:
        high = 0.0
    low += configs_waiting * least_sweep
    overhead_cap = 2 * max(overheads) if overheads else None
    if high is None or overhead_cap is None or (configs_waiting and whole_cap is None):
        return _finite(TimeLeft(low, max(low, likely or 0.0), None))
    runs = configs_waiting + (current is not None)
    high += configs_waiting * (whole_cap or 0.0) + (runs + 1) * overhead_cap
    return _finite(TimeLeft(low, min(max(low, likely or 0.0), high), high))
