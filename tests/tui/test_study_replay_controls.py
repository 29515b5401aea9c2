"""Study replay gets a single recording's controls: pause, speed, seek, a level, step and export
act on the config being played (a real StudyReplaySource over recordings written by the real
Recorder from synthetic sessions: test inputs, not results)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import events as ev
from engine.study.index import StudyIndex, VariantRun, write_index
from engine.study.study_replay import StudyReplaySource
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tui.study_app import StudyApp


@pytest.fixture
def study(tmp_path: Path) -> Path:
    runs = []
    for variant, t0 in (("1x", 1_771_169_400.0), ("2x", 1_771_179_400.0)):
        run = SyntheticRun(gpu_model="H200", gpu_count=2, variant=variant, profile_name="2x_h200", levels=[1, 4, 8],
                           window_s=1.0, probe=False, telemetry_hz=1.0, t0=t0)
        path = record_events(tmp_path / f"{variant}.sqlite", synthetic_session(run))
        runs.append(VariantRun(variant, path.name, "ok", 0))
    index = StudyIndex(study_id="s", profile="2x_h200", model="openclip_vit_b32", variants=["1x", "2x"],
                       server="embedded", slo="p99=100ms", search_steps=0, runs=runs, status="ok")
    path = tmp_path / "s.study.json"
    write_index(index, path)
    return path


async def _until(pilot, condition, tries: int = 100) -> None:  # noqa: ANN001
    for _ in range(tries):
        if condition():
            return
        await pilot.pause(0.05)
    assert condition()


async def test_pause_speed_level_step_and_export_act_on_the_config_being_played(study: Path) -> None:
    source = StudyReplaySource(study, speed=1.0)
    app = StudyApp(replay=source)
    app.attach(source, replay=source)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: source.path is not None and source.path.name == "1x.sqlite")
        await pilot.press("space")  # pause
        await _until(pilot, lambda: source.paused)
        assert source._current is not None and source._current.paused  # the recording itself is paused
        held = source.position_s
        await pilot.press("plus")  # faster: x2 on the recording being played
        await _until(pilot, lambda: source.speed == 2.0 and source._current is not None and source._current.speed == 2.0)
        await pilot.press("right_square_bracket")  # the next level of this config
        await _until(pilot, lambda: app.state.current_level is not None and app.state.current_level >= 0)
        assert source.position_s >= held
        published = app.state.events_applied
        await pilot.press("full_stop")  # one event forward, paused
        await _until(pilot, lambda: app.state.events_applied > published)
        assert source.paused
        await pilot.press("e")  # export the config being played: its recording's report
        await pilot.pause()
        await pilot.press("down", "down", "down", "enter")  # json, csv, md, html: the fourth
        await _until(pilot, lambda: any(study.parent.glob("1x*.html")), tries=200)
        await pilot.press("space")  # play on: 1x, then 2x, then the study's end
        source.set_speed(None)
        await _until(pilot, lambda: source.finished and app.study.finished is not None, tries=400)
        assert source.path is not None and source.path.name == "2x.sqlite"
        assert set(app.study.configs) == {"1x", "2x"}
        assert [len(t.points) for t in app.study.configs.values()] == [3, 3]


def test_a_seek_back_in_a_config_does_not_count_its_levels_twice() -> None:
    from tui.study_state import StudyState

    state = StudyState()
    state.apply(ev.StudyStarted(study_id="s", model="m", variants=["1x"], levels=[1, 4], mode="concurrency",
                                server="embedded"))
    state.apply(ev.StudyVariantStarted(variant="1x", position=0))
    result = ev.LevelResult(mode="concurrency", level=1, index=0, status="stable", batch_size=1, windows=3,
                            merged_windows=3, requests=10, errors=0, throughput_rps=10, throughput_ips=10,
                            latency=ev.LatencyStats(count=10, p99=0.01))
    state.apply(result)
    state.apply(ev.ReplayReset(position_s=0.0))  # the replay goes back to the config's start
    state.apply(result)
    assert len(state.configs["1x"].points) == 1 and state.configs["1x"].levels_done == 1
