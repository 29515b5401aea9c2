"""The sweep panel at 80x24 with a second sweep: its own rows under its title, and room for the
throughput bars beside an interrupted level."""

from __future__ import annotations

import pytest

SIZE = (80, 24)


def second_sweep_stopped_at_its_second_level() -> list:
    """`s` again after a full sweep, then `x` during its second level (an interrupted row)."""
    from engine import events as ev
    from tests.tui.synthetic import breakdown, latency, two_sweep_events

    events = two_sweep_events()[:-1]  # the second sweep's first level, not yet finished
    t = events[-1].ts
    events.append(ev.LevelStarted(mode="concurrency", level=2, index=1, total=4, workers=2, ts=t + 1))
    events.append(ev.LevelResult(
        mode="concurrency", level=2, index=1, status="interrupted", batch_size=1, windows=1, merged_windows=0,
        requests=100, errors=0, throughput_rps=300.0, throughput_ips=300.0, latency=latency(0.0031),
        server=breakdown(0.0, 0.0016, 0.9), audit=ev.ClientAudit(cpu_percent=34.0, cpu_cores=16), duration_s=2.0,
        ts=t + 3))
    events.append(ev.SweepFinished(levels=2, stable=1, failed=0, ts=t + 3.5))
    return events


def sweep_panel_lines(rows: list[str]) -> list[str]:
    """The rows of the screen from the sweep panel's title to the next panel's."""
    start = next(i for i, row in enumerate(rows) if row.lstrip("─").startswith("sweep 2 ·"))
    end = next((i for i in range(start + 1, len(rows)) if rows[i].startswith("─") and any(c.isalpha() for c in rows[i])),
               len(rows) - 1)  # a titled border; the table's own rule under its head has no words
    return rows[start:end]


@pytest.mark.slow
async def test_a_second_sweep_shows_its_own_rows_under_its_title_at_80x24() -> None:
    """Under the "sweep 2" title are sweep 2's rows: the live view follows the current sweep's
    table, not the panel's end (which holds the first sweep's)."""
    from tests.tui.synthetic import two_sweep_events
    from tests.tui.test_app_pilot import live_app, publish, screen_lines

    events = two_sweep_events()[:-1]  # running: its first level measured
    app, source, _ = live_app(events)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events[:-1])  # sweep 2's level is running ...
        app.drain()
        await pilot.pause(0.3)
        publish(source, events[-1:])  # ... and now measured
        app.drain()
        await pilot.pause(0.3)
        panel = sweep_panel_lines(screen_lines(app))
        assert any(row.lstrip().startswith("1    217.0") for row in panel), "\n".join(panel)


@pytest.mark.slow
async def test_an_interrupted_level_keeps_the_throughput_bars_at_80x24() -> None:
    """The word "interrupted" in the status column leaves the bars their room, in both sweeps'
    tables."""
    from tests.tui.test_app_pilot import live_app, publish, screen_lines

    events = second_sweep_stopped_at_its_second_level()
    app, source, _ = live_app(events)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events)
        app.drain()
        for key in ("1", "2"):
            await pilot.press(key)
            await pilot.pause(0.3)
            panel = sweep_panel_lines(screen_lines(app))
            text = "\n".join(panel)
            assert "through" in panel[1], text  # the head of sweep 2's table ("through…" at 8 cells)
            interrupted = next(row for row in panel if "interrupted" in row)
            assert "300.0" in interrupted and "█" in interrupted, text
