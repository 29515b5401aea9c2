"""Issue 54, item 11: the frictions a newcomer hit, each held at 80x24 and 120x40 where it is
about layout (Textual's pilot, synthetic events; the numbers are test inputs, not results)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from engine import events as ev
from tests.structs import replace
from tests.tui.fakes import ListSource
from tests.tui.synthetic import session_events
from tests.tui.test_app_pilot import live_app, panel_text, publish, screen_lines
from tests.tui.test_stream_charts import _streaming
from tests.tui.test_study_tui import study_events
from tui.study_app import StudyApp

SIZES = [(80, 24), (120, 40)]


async def until(pilot, condition: Callable[[], bool], tries: int = 100) -> bool:  # noqa: ANN001
    """Bounded against a hang only: the refresh tick and the layout catch up in a few frames."""
    for _ in range(tries):
        if condition():
            return True
        await pilot.pause(0.05)
    return condition()


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
async def test_the_study_table_never_cuts_the_slo_figure(size: tuple[int, int]) -> None:
    """`SLO point (p99=3000ms)` cut to `p99=300…` read as 300 ms: the target stays whole, and so
    does every figure under it."""
    events = study_events(finish=True)
    events[0].slo = "p99=3000ms"
    app = StudyApp()
    source = ListSource(events, linger=False)
    app.attach(source, start=False)
    async with app.run_test(size=size) as pilot:
        source.start()
        source.join(5)
        table = app.query_one("#study-table")

        def shown() -> str:
            table.scroll_visible(animate=False)
            return "\n".join(screen_lines(app))

        assert await until(pilot, lambda: app.study.finished is not None and "2x.sqlite" in shown()), shown()
        text = shown()
        assert "p99=3000ms" in text and "p99=300…" not in text
        rows = [line.strip(" │") for line in text.splitlines() if line.strip(" │").startswith(("1x ", "2x "))]
        assert [row.split()[3:7] for row in rows] == [["1,000", "64", "64", "1,000"], ["1,900", "64", "64", "1,900"]]


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
async def test_a_warmup_window_does_not_raise_bound(size: tuple[int, int]) -> None:
    """Level 16's warm-up window carries a client-bound audit (synthetic.py): it measures nothing,
    so the running row's client column waits for a measured window; that one's verdict shows."""
    events = session_events(finish_levels=3, end=False, probe=False)
    warmup, measured = [e for e in events if isinstance(e, ev.WindowResult) and e.level == 16]
    assert warmup.warmup and warmup.audit.client_bound and measured.audit.client_bound
    app, source, _ = live_app(events[: events.index(measured)])
    async with app.run_test(size=size) as pilot:
        publish(source, events[: events.index(measured)])
        app.drain()

        def row16() -> str:
            return next((line for line in screen_lines(app) if re.match(r"[│ ]*16 ", line)), "")

        assert await until(pilot, lambda: "running" in row16()), "\n".join(screen_lines(app))
        assert "BOUND" not in row16() and " ok " not in row16(), row16()
        publish(source, [measured])
        app.drain()
        assert await until(pilot, lambda: "BOUND" in row16()), row16()


def retried_level_events() -> list[ev.Event]:
    """The synthetic sweep with level 8 measured twice (its trial 2 right after trial 1, as the
    engine's trials re-measure an unstable level), then level 16."""
    events = session_events(probe=False)
    first16 = next(e for e in events if isinstance(e, ev.LevelStarted) and e.level == 16)
    at = events.index(first16)
    trial1 = [e for e in events[:at] if getattr(e, "level", None) == 8 and isinstance(e, (ev.LevelStarted, ev.WindowResult, ev.LevelResult))]
    shift = trial1[-1].ts - trial1[0].ts + 1.0
    trial2 = [replace(e, ts=e.ts + shift, **({"trial": 2} if isinstance(e, (ev.LevelStarted, ev.LevelResult)) else {}))
              for e in trial1]
    later = [replace(e, ts=e.ts + shift) for e in events[at:]]
    return [*events[:at], *trial2, *later]


@pytest.mark.slow
async def test_replay_brackets_step_through_every_trial_of_a_level(tmp_path) -> None:  # noqa: ANN001
    """`]` from the start visits each level start in recorded order, level 8's trial 2 included;
    `[` from level 16 goes back to that trial 2, not past it."""
    from engine.record.recorder import Recorder
    from engine.record.replay_source import ReplaySource
    from tui.app import GpuscaleApp

    events = retried_level_events()
    path = tmp_path / "retried.sqlite"
    recorder = Recorder(path)
    for event in events:
        recorder(event)
    recorder.close()
    starts = [e for e in events if isinstance(e, ev.LevelStarted)]
    assert [(e.level, e.trial) for e in starts] == [(1, 1), (4, 1), (8, 1), (8, 2), (16, 1)]
    offsets = [e.ts - events[0].ts for e in starts]

    source = ReplaySource(path, speed=1.0, paused=True)
    app = GpuscaleApp(replay=source)
    app.attach(source, replay=source)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            def settled(n: int) -> Callable[[], bool]:
                return lambda: not source.seeking and not app.inbox and app.state.level_starts == n

            visited = []
            for n in range(1, len(starts) + 1):
                await pilot.press("right_square_bracket")
                assert await until(pilot, settled(n)), (n, app.state.level_starts)
                row = app.state.levels[app.state.current_level]
                visited.append((row.level, source.position_s))
                if n == 4:  # the status line says which trial is shown
                    assert await until(pilot, lambda: "c=8 trial 2" in "\n".join(screen_lines(app))), screen_lines(app)
            assert visited == [(e.level, pytest.approx(t)) for e, t in zip(starts, offsets, strict=True)]
            await pilot.press("left_square_bracket")
            assert await until(pilot, settled(4))
            assert source.position_s == pytest.approx(offsets[3]) and app.state.levels[2].level == 8
    finally:
        assert not app.stop_sources(timeout=5.0)


@pytest.mark.slow
@pytest.mark.parametrize("size", [*SIZES, (80, 40)])
async def test_queue_and_compute_keep_their_unit_at_80_columns(size: tuple[int, int]) -> None:
    """At 80 columns the sweep table spares p95 and the percentiles' "ms" (the title says "times
    in ms") before queue's and compute's: `queue ms` and `compute ms` stay, on the live view and
    the sweep view; at 80x24 the throughput bars stay too."""
    events = session_events(levels=(1, 2, 4, 8, 16, 32, 64), finish_levels=7, end=False, probe=False)
    app, source, _ = live_app(events)
    async with app.run_test(size=size) as pilot:
        publish(source, events)
        app.drain()
        for key in ("1", "2"):
            await pilot.press(key)

            def header() -> str:
                return next((line for line in screen_lines(app) if re.search(r"level\s+infer/s", line)), "")

            assert await until(pilot, lambda: "compute" in header()), "\n".join(screen_lines(app))
            assert re.search(r"queue ms\s+compute ms", header()), header()
            if size == (80, 24):
                assert "client  throughput" in header(), header()


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
async def test_one_unit_name_per_rate_across_charts_and_tables(size: tuple[int, int]) -> None:
    """A unary sweep's rate is infer/s in the tables and on the knee's axis alike (it said
    images/s there); a streaming sweep's tables, status and over-time rows say req/s, what that
    rate counts, and never infer/s; at 80 columns its table spares columns, it cuts none."""
    from tests.tui.test_snapshots import fed

    def screen() -> str:
        return "\n".join(screen_lines(app))

    app, run_before = fed(session_events(n_gpus=1, finish_levels=3, end=False))
    async with app.run_test(size=size) as pilot:
        await run_before(pilot)
        await pilot.press("6")
        assert await until(pilot, lambda: "vs infer/s" in screen() and "● p50" in screen()), screen()
        assert "images/s" not in screen()
        await pilot.press("2")
        assert await until(pilot, lambda: re.search(r"level\s+infer/s", screen()) is not None), screen()

    app, run_before = fed(_streaming(session_events(n_gpus=1, finish_levels=3, end=False)))
    async with app.run_test(size=size) as pilot:
        await run_before(pilot)
        await pilot.press("2")
        assert await until(pilot, lambda: re.search(r"kind\s+(requests\s+)?req/s", screen()) is not None), screen()
        assert "best 720.0 req/s" in screen() and "infer/s" not in screen(), screen()
        assert re.search(r"level\s+req/s", screen()), screen()
        assert "…" not in "\n".join(row for row in screen_lines(app) if re.match(r"[│ ]*(level|1|4|8|16) ", row))


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
async def test_the_study_view_counts_in_the_tables_unit(size: tuple[int, int]) -> None:
    app = StudyApp()
    source = ListSource(study_events(finish=True), linger=False)
    app.attach(source, start=False)
    async with app.run_test(size=size) as pilot:
        source.start()
        source.join(5)
        shot = ""
        for _ in range(100):  # laid out, the table scrolled into view
            app.query_one("#study-table").scroll_visible(animate=False)
            await pilot.pause(0.05)
            shot = "\n".join(screen_lines(app))
            if "2x.sqlite" in shot:
                break
        assert "infer/s vs concurrency" in shot or size[1] < 40, shot  # the curves' key: in the first screen at 120x40
        table = shot.split("configs")[-1]
        assert "peak" in table and "infer/s" in table and "images/s" not in shot, shot


def no_gpu_session(remote: bool) -> list[ev.Event]:
    """The synthetic sweep with no GPU sample at all: its profile declares 4 GPUs (not a CPU run),
    the server embedded, or remote with a metrics URL."""
    events = [e for e in session_events(probe=False, end=False) if not isinstance(e, ev.GpuSample)]
    if remote:
        start = events[0]
        assert isinstance(start, ev.SessionStarted)
        start.profile["server"] = {"kind": "remote", "url": "http://box:8000", "metrics_url": "http://box:8002/metrics"}
        ready = next(e for e in events if isinstance(e, ev.ServerReady))
        ready.embedded, ready.http_url, ready.metrics_url = False, "http://box:8000", "http://box:8002/metrics"
    return events


NVML_MISSING = ev.Warning(source="telemetry", key="nvml-missing",
                          message="NVML unavailable (no NVIDIA driver: libnvidia-ml.so.1 not found): local GPU values are n/a")
METRICS_NO_GPU = ev.Warning(source="telemetry", key="triton-metrics-no-gpu",
                            message="Triton metrics at http://box:8002/metrics have no nv_gpu_* values (CPU-only server, "
                                    "MIG, --allow-gpu-metrics=false, or another DCGM agent holds the GPUs): remote GPU "
                                    "values are n/a")


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("remote, warning, reason", [
    (False, NVML_MISSING, "NVML unavailable (no NVIDIA driver: libnvidia-ml.so.1 not found)"),
    (True, METRICS_NO_GPU, "Triton metrics at http://box:8002/metrics have no nv_gpu_* values"),
])
async def test_no_gpu_telemetry_is_said_once_the_sampler_says_none_will_come(
        size: tuple[int, int], remote: bool, warning: ev.Warning, reason: str) -> None:
    """Without GPU samples the panel waits; once the sampler's warning says none will come (NVML
    unavailable here, no GPU series in the server's /metrics), it says "no GPU telemetry" and why,
    whole, on the live view and on the charts view."""
    from tui.widgets.charts import GpuHistoryPanel
    from tui.widgets.gpus import GpuPanel

    events = no_gpu_session(remote)
    app, source, _ = live_app(events)
    async with app.run_test(size=size) as pilot:
        publish(source, events)
        app.drain()

        def said(kind: type) -> str:  # the panel's note, its wrapped lines read as one
            return " ".join(panel_text(app.screen.query_one(kind)).split())

        assert await until(pilot, lambda: "waiting for GPU telemetry" in said(GpuPanel)), said(GpuPanel)
        publish(source, [replace(warning, ts=events[-1].ts)])
        app.drain()
        assert await until(pilot, lambda: f"no GPU telemetry: {reason}" in said(GpuPanel)), said(GpuPanel)
        assert "waiting" not in said(GpuPanel) and "no GPU telemetry:" in "\n".join(screen_lines(app))
        await pilot.press("6")
        assert await until(pilot, lambda: f"no GPU telemetry: {reason}" in said(GpuHistoryPanel)), said(GpuHistoryPanel)


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("gpus", [0, 1, 8])
async def test_the_charts_use_the_height_they_have(size: tuple[int, int], gpus: int) -> None:
    """The charts view left 14 blank rows under its panels at 120x40 (no GPU: a one-line GPU
    panel): the knee and the over-time charts now grow into the height the GPUs and the host
    leave, so no row of the screen is blank; with 8 GPUs at 80x24 the charts keep their compact
    form and the view scrolls instead."""
    from tests.tui.test_snapshots import fed
    from tui.widgets.charts import KneePanel

    app, run_before = fed(session_events(n_gpus=gpus, finish_levels=3, end=False, probe=False))
    async with app.run_test(size=size) as pilot:
        await run_before(pilot)
        await pilot.press("6")

        def blank_rows() -> list[int]:
            return [i for i, row in enumerate(screen_lines(app)) if not row.strip()]

        assert await until(pilot, lambda: "the knee" in "\n".join(screen_lines(app)) and not blank_rows()), \
            "\n".join(screen_lines(app))
        knee = app.screen.query_one(KneePanel)
        plot_rows = sum(1 for line in panel_text(knee).splitlines() if "┤" in line or "│" in line[:8])
        assert plot_rows >= (10 if size[1] >= 34 else 5)  # never below the compact form
        if gpus == 0 and size == (120, 40):
            assert plot_rows > 20  # the rows the blank band had


@pytest.mark.slow
async def test_an_interrupted_level_keeps_units_and_bars_at_80x24() -> None:
    """"interrupted", the widest status, leaves room for both: queue ms and compute ms, and the
    bars at their narrowest."""
    from tests.tui.test_sweep_panel import (
        second_sweep_stopped_at_its_second_level,
        sweep_panel_lines,
    )

    events = second_sweep_stopped_at_its_second_level()
    app, source, _ = live_app(events)
    async with app.run_test(size=(80, 24)) as pilot:
        publish(source, events)
        app.drain()
        await pilot.press("2")
        assert await until(pilot, lambda: any("interrupted" in row for row in sweep_panel_lines(screen_lines(app))))
        head = sweep_panel_lines(screen_lines(app))[1]
        assert re.search(r"queue ms\s+compute ms", head) and "through" in head, head


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("finish", [False, True])
async def test_the_study_charts_use_the_height_the_table_leaves(size: tuple[int, int], finish: bool) -> None:
    """The study view's charts stopped at 18 lines and left a blank band under the config table
    at 120x40: they take the rows the table (and, once the study ends, its scale answer) leaves,
    so the first screen ends with those, running or finished, and no row is blank."""
    from tests.tui.test_study_scale_view import LINE

    events = study_events(finish=finish)
    if finish:
        events[-1] = replace(events[-1], scale_answers=[LINE])
    app = StudyApp()
    source = ListSource(events if finish else events[:6], linger=False)
    app.attach(source, start=False)
    async with app.run_test(size=size) as pilot:
        source.start()
        source.join(5)

        def rows() -> list[str]:
            return screen_lines(app)

        def settled() -> bool:
            shown = rows()
            table_end = any(row.strip(" │").startswith("2x ") for row in shown)
            scale = not finish or size[1] < 40 or any("→ scale out" in row for row in shown)  # 80x24: below the fold
            return table_end and scale and not [row for row in shown if not row.strip()]

        assert await until(pilot, settled), "\n".join(rows())
        assert "throughput vs concurrency" in "\n".join(rows())


def test_an_unreachable_metrics_url_is_still_waited_for_and_says_why() -> None:
    """Unreachable is retried (GPU values may still come): the panel keeps waiting, with the reason."""
    from tui.state import SessionState
    from tui.widgets.gpus import render_gpus

    state = SessionState()
    state.apply_all([e for e in no_gpu_session(remote=True) if isinstance(e, (ev.SessionStarted, ev.ServerReady))])
    state.apply(ev.Warning(source="telemetry", key="triton-metrics-unreachable",
                           message="Triton metrics at http://box:8002/metrics unreachable (connection refused): remote "
                                   "GPU values are n/a until it answers"))
    note = " ".join(render_gpus(state, 100, detail=False).plain.split())
    assert note.startswith("waiting for GPU telemetry from the server's /metrics (server.metrics_url): Triton metrics "
                           "at http://box:8002/metrics unreachable (connection refused)") and "n/a" not in note, note
