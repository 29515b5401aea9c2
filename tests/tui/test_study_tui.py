"""The study view: curves per config and the config table, as text and in the running app (pilot)."""

from __future__ import annotations

import pytest
from rich.console import Console

from engine import events as ev
from tests.tui.fakes import ListSource
from tui.study_app import StudyApp
from tui.study_state import StudyState
from tui.study_view import config_table, headline, render_curves

T0 = 1_771_169_400.0


def _level(index, level, tp, p99, t, search=False):
    lat = ev.LatencyStats(count=100, mean=p99 / 2, p50=p99 / 2, p95=p99 * 0.9, p99=p99)
    return ev.LevelResult(mode="concurrency", level=level, index=index, status="stable", batch_size=1, windows=3,
                          merged_windows=3, requests=100, errors=0, throughput_rps=tp, throughput_ips=tp, latency=lat,
                          slo_search=search, ts=t)


def study_events(finish: bool = False) -> list[ev.Event]:
    out: list[ev.Event] = [ev.StudyStarted(study_id="s", model="openclip_vit_b32", variants=["1x", "2x"],
                                           levels=[1, 8, 64], mode="concurrency", server="embedded",
                                           slo="p99=50ms", search_steps=2, ts=T0)]
    t = T0
    for variant, scale in (("1x", 1.0), ("2x", 1.9)):
        out += [ev.StudyVariantStarted(variant=variant, position=0 if variant == "1x" else 1, ts=t + 1),
                ev.SessionStarted(session_id=variant, profile_name="2x_h200", profile={}, mode="sweep", ts=t + 1)]
        for i, (lv, tp, p99) in enumerate([(1, 100, 0.01), (8, 700, 0.03), (64, 1000, 0.2), (32, 950, 0.06)]):
            out.append(_level(i, lv, tp * scale, p99, t + 10 + i, search=i == 3))
        if variant == "1x" or finish:
            out += [ev.SessionEnded(status="ok", ts=t + 20),
                    ev.StudyVariantFinished(variant=variant, position=0, status="ok", exit_code=0,
                                            recording=f"{variant}.sqlite", ts=t + 20)]
        t += 30
    if finish:
        out.append(ev.StudyFinished(status="ok", finished=["1x", "2x"], ts=t))
    return out


def _text(renderable, width=100) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_curves_and_table_from_study_state():
    state = StudyState()
    for e in study_events():
        state.apply(e)
    curves = _text(render_curves(state, 90, 14))
    assert "● 1x" in curves and "■ 2x" in curves and "1,900" in curves  # the y axis tops at 2x's peak
    # 4 points each + the legend; at level 1 the two configs share a cell (2x drawn last)
    assert curves.count("●") >= 4 and curves.count("■") >= 5
    table = _text(config_table(state))
    rows = {line.split()[0]: line.split() for line in table.splitlines() if line.strip().startswith(("1x", "2x"))}
    assert rows["1x"][:5] == ["1x", "ok", "4", "1,000", "64"]
    assert rows["2x"][:5] == ["2x", "running", "4", "1,900", "64"]
    assert rows["1x"][5:7] == ["8", "700.0"]  # p99 <= 50 ms up to 8 (32 measured 60 ms)
    head = _text(headline(state))
    assert "config 2/2 (2x)" in head and "left" in head and "p99=50ms" in head


@pytest.mark.slow
@pytest.mark.asyncio
async def test_study_view_fills_in_live():
    app = StudyApp()
    source = ListSource(study_events(finish=True), linger=False)
    app.attach(source, start=False)
    async with app.run_test(size=(110, 40)) as pilot:
        source.start()
        source.join(5)
        await pilot.pause(0.5)
        assert app.current_mode == "study"
        assert app.study.finished is not None and set(app.study.configs) == {"1x", "2x"}
        needles = ("study ok", "1,900", "1x", "2x", "SLO point")
        for _ in range(30):  # a loaded CI box may need more than one frame to lay out the panels
            shot = app.export_screenshot().replace("&#160;", " ")
            if all(needle in shot for needle in needles):
                break
            await pilot.pause(0.1)
        for needle in needles:
            assert needle in shot
        # the session views show the config measured last, not both sessions' levels mixed
        assert len(app.state.levels) == 4
        await pilot.press("2")
        await pilot.press("5")
        assert app.current_mode == "study"


def test_the_knee_has_a_curve_per_config_the_target_and_open_unstable_points():
    from tui.study_view import render_knee

    events = study_events()
    unstable = next(e for e in events if isinstance(e, ev.LevelResult) and e.level == 64)
    unstable.status = "unstable"  # 1x's level 64: drawn open, not as a sound point
    state = StudyState()
    for e in events:
        state.apply(e)
    knee = _text(render_knee(state, 90, 14))
    assert "● 1x" in knee and "● 2x" in knee and "target 50 ms" in knee and "p99 ms (log)" in knee
    plot = knee.split("● 1x")[0]
    assert plot.count("○") == 1 and plot.count("●") == 7  # 4 levels each, 1x's 64 open
    labels = [line.split("┤")[0].strip() for line in plot.splitlines() if "┤" in line[:8]]
    assert labels == ["1s", "100", "10"]  # decades from 10 ms to 1 s, p99 in ms


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_study_view_shows_the_knee_at_both_sizes(size):
    app = StudyApp()
    source = ListSource(study_events(finish=True), linger=False)
    app.attach(source, start=False)
    async with app.run_test(size=size) as pilot:
        source.start()
        source.join(5)
        for _ in range(30):  # until the study's end is shown, then the knee brought into view
            await pilot.pause(0.1)
            if app.study.finished is not None and "study ok" in app.export_screenshot().replace("&#160;", " "):
                break
        knee = app.query_one("#study-knee" if size[0] >= 120 else "#study-knee-low")
        for _ in range(30):  # laid out, then scrolled into view
            knee.scroll_visible(animate=False)
            await pilot.pause(0.1)
            shot = app.export_screenshot().replace("&#160;", " ")
            if "the knee" in shot and "target 50 ms" in shot:
                break
        assert "the knee" in shot and "target 50 ms" in shot and "1x" in shot and "2x" in shot
        if size[0] >= 120:  # side by side with the throughput curves, both in the first screen
            assert "throughput vs concurrency" in shot


def test_a_streaming_study_counts_tokens_in_the_view():
    """A streaming model's configs: the peak and the curves are in output tokens/s (the rule of
    every report: the sound level with the most tokens), never images/s."""
    from tui.study_view import render_knee

    events = study_events()
    for e in events:
        if isinstance(e, ev.LevelResult):
            e.stream = ev.StreamStats(ttft=ev.LatencyStats(count=100, p99=0.01), itl=ev.LatencyStats(count=700, p99=0.005),
                                      responses_per_request=8, output_tokens_per_s=8 * e.throughput_rps)
    state = StudyState()
    for e in events:
        state.apply(e)
    assert state.items == "tokens"
    assert state.configs["1x"].peak() == (64.0, 8000.0)
    table = _text(config_table(state))
    assert "peak tokens/s" in table and "8,000" in table and "images/s" not in table
    assert "tokens/s vs concurrency" in _text(render_curves(state, 90, 14))
    assert "vs tokens/s" in _text(render_knee(state, 90, 14))
