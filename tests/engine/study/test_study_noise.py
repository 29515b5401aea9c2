"""The newcomer's study (`study --slo p99=50ms` over concurrency 1, 4, 8) with a CPU hog held
while concurrency 1 is measured: it ends with the SLO point at a sound level or "not decided",
never a decision drawn from the noisy level and never "no usable result"."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from bench.hogs import cpu_hogs
from engine import events as ev
from engine.analysis.slo import parse_slo
from engine.hostinfo import process_cores
from engine.profiles import load_profile
from engine.study.figures import answer_line, study_figures
from engine.study.study_source import StudySource

QUICK = ["model.name=identity", "load.window_ms=300", "load.warmup_s=0.3", "load.min_window_requests=20",
         "load.max_windows=4", "load.request_timeout_s=5", "load.trial_budget_s=30", "load.concurrency=1,4,8"]


@pytest.mark.noise
@pytest.mark.server
@pytest.mark.slow
@pytest.mark.xdist_group("cpu_study")  # a CPU study: tests/conftest.py
def test_a_hog_during_one_level_decides_nothing_there(tmp_path: Path) -> None:
    study = StudySource(load_profile("local", QUICK), ["cpu"], slo=parse_slo("p99=50ms"), record_dir=tmp_path,
                        gpu_count=0, search_steps=0)
    hogs = contextlib.ExitStack()
    held: list[float] = []
    finished: list[ev.StudyFinished] = []

    def watch(event: ev.Event) -> None:  # the hog is held from concurrency 1's start to the next level's
        if isinstance(event, ev.StudyFinished):
            finished.append(event)
        elif isinstance(event, ev.LevelStarted) and event.level == 1 and not held:
            held.append(event.level)
            hogs.enter_context(cpu_hogs(process_cores(), tmp_path))
        elif isinstance(event, ev.LevelStarted) and event.level != 1:
            hogs.close()

    study.bus.subscribe(watch)
    study.prepare()
    try:
        study.start()
        assert study.join(300)
    finally:
        hogs.close()
    assert held and study.exit_code == 0
    figures = study_figures(study.index_path)
    (config,) = figures.configs
    assert config.answer is not None
    one = next(r for r in config.answer.levels if r.level == 1)
    assert one.status == "contended" and one.trial > 1  # measured again while the hog ran, and left out
    assert all(r.level != 1 for r in config.answer.sound)
    assert config.slo is not None and config.slo.level != 1
    assert "no usable result" not in figures.stop.reason
    (end,) = finished
    assert end.answer == answer_line(figures) and "no usable result" not in end.answer
    assert end.answer.startswith(("answer: at p99 <= 50 ms, stop at 1 CPU instance (cpu): ", "answer: not decided: "))
