"""Levels measured on a box that others keep busy: with CPU hogs (not ours) running, every level
is marked contended and measured again, each trial kept; a server noisy at one concurrency only
decides nothing there."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from bench.hogs import cpu_hogs
from engine.analysis.answer import decide
from engine.events import Event, LevelResult, LevelStarted
from engine.hostinfo import process_cores
from engine.load.sweep import run_sweep
from engine.triton.api import TritonApi
from engine.triton.target import Target, describe_target
from tests.engine.load.conftest import Events, quick_load
from tests.reliability.hostile_server import HostileTriton, Reply, Seen, _ok_infer


@pytest.mark.noise
@pytest.mark.slow
async def test_levels_under_hogs_are_contended_and_measured_again(identity_server, identity_info, tmp_path: Path):
    target = Target(identity_server.http_url, "identity")
    load = quick_load(concurrency=[1, 2], contended_percent=30.0, max_trials=2, trial_budget_s=60.0)
    events = Events()
    with cpu_hogs(process_cores(), tmp_path):
        results = await run_sweep(TritonApi(target, identity_info), load, events.append, asyncio.Event())
    published = [e for e in events.of("level_result") if isinstance(e, LevelResult)]
    # the mark follows what was measured: contended exactly where others took over 30 % (the
    # scheduler decides how much the hogs get in a given level; the first level always had them)
    assert results[0].status == "contended"
    for r in published:
        assert r.others_cpu is not None
        if r.status != "failed":
            taken = (r.others_cpu + (r.steal or 0.0)) * 100
            assert (r.status == "contended") == (taken > 30.0), (r.level, r.trial, r.status, r.others_cpu)
    for level in (1.0, 2.0):
        trials = [r for r in published if r.level == level]
        if trials[0].status == "contended":  # measured again, every trial kept
            assert [r.trial for r in trials] == [1, 2]
            assert trials[0].remeasure.startswith("others took") and trials[1].remeasure == ""
    windows = [w for w in events.of("window") if not w.warmup]
    assert windows and all(w.others_cpu is not None for w in windows)
    answer = decide(published)
    if all(r.status == "contended" for r in results):
        assert answer.best is None and answer.line.startswith("answer: not decided: 2 of 2 levels contended (others ")
        assert answer.not_decided.startswith("no sound level: concurrency 1 contended")
    assert answer.best is None or answer.best.status == "stable"  # never a contended level


class NoisyAtOneLevel:
    """Answers at once, except while the sweep measures concurrency 2: there each request is
    answered more slowly than the one before (60 ms a request at a trial's start, 6 % more for
    each one after, no ceiling). A window holds at least 6 requests (min_window_requests), so each
    window's requests are at least 1.4x as slow as the last 6 of the window before, whatever the
    box's load and whenever the sweep publishes its windows: no two windows agree. (A slowdown per
    published window let a window published late agree with the one before; a ceiling let two
    windows past it agree.)"""

    BASE_S = 0.060
    GROWTH = 1.4 ** (1 / 6)

    def __init__(self) -> None:
        self.noisy = False
        self.served = 0
        self.lock = threading.Lock()

    def publish(self, events: Events):  # noqa: ANN201 - the sweep's publish callback
        def publish(event: Event) -> None:
            if isinstance(event, LevelStarted):
                with self.lock:
                    self.noisy, self.served = event.level == 2, 0
            events.append(event)
        return publish

    def infer(self, seen: Seen) -> Reply:
        with self.lock:
            delay_s = self.BASE_S * self.GROWTH ** self.served if self.noisy else 0.0
            self.served += self.noisy
        if delay_s:
            time.sleep(delay_s)
        return _ok_infer(seen)


@pytest.mark.noise
@pytest.mark.slow
async def test_a_server_noisy_at_one_concurrency_decides_nothing_there() -> None:
    noisy = NoisyAtOneLevel()
    with HostileTriton(infer=noisy.infer) as srv:
        target = Target(srv.url, "m")
        info = await describe_target(target)
        # the CPU rule is off here (this box is always busy): the noise is the server's own
        load = quick_load(concurrency=[1, 2, 4], contended_percent=100.0, max_trials=2, trial_budget_s=60.0,
                          window_ms=300, max_windows=4, stable_windows=2, workers=1, min_window_requests=6)
        events = Events()
        results = await run_sweep(TritonApi(target, info), load, noisy.publish(events), asyncio.Event())
    published = [e for e in events.of("level_result") if isinstance(e, LevelResult)]
    two = [r for r in published if r.level == 2]
    assert two and all(r.status != "stable" for r in two), [(r.trial, r.status) for r in two]
    if two[0].status == "unstable":  # (a level failed under the noise is no trial's business)
        assert [r.trial for r in two] == [1, 2] and two[0].remeasure == "its windows did not agree"
    answer = decide(results)
    assert all(r.level != 2 for r in answer.sound)
    assert answer.best is None or answer.best.level != 2
    assert any(text.startswith("concurrency 2 unstable after 2 trials") for text in answer.left_out)
    from engine.analysis.slo import parse_slo

    slo = decide(results, parse_slo("p99=1000ms"))  # every level meets it: the point is never level 2
    assert slo.slo_level is None or slo.slo_level.level != 2
