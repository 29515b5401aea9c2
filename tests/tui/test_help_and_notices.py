"""The words around the figures agree with the tool: the README's view keys, what "ours" CPU is a
share of (help and headless line), and where the recording's path is shown."""

from __future__ import annotations

from pathlib import Path

import pytest

SIZE = (80, 24)


def test_the_readme_names_each_view_key_as_the_tool_does() -> None:
    """The README names each view with its key as the footer does, and the study's own view as the
    study's only."""
    from tui.screens.views import VIEWS

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for view in VIEWS:
        named = f"`{view.key}` {view.title}" + (", in `study` only" if view.study_only else "")
        assert named in readme, named


def test_ours_is_a_share_of_the_host_in_the_help_the_screen_and_the_log() -> None:
    """"ours" is a share of the whole host (0-100 %) in the help and in the headless line alike,
    never a share of one core (180 %)."""
    import io

    from rich.console import Console

    from engine import events as ev
    from tests.tui.synthetic import T0, profile
    from tui.headless import HeadlessPrinter
    from tui.screens.help import HELP

    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=160))
    printer(ev.SessionStarted(session_id="s", profile_name="cpu", profile=profile(gpu_count=0), mode="sweep",
                              host={"cpu_cores": 4}, ts=T0))
    printer(ev.HostSample(cpu_percent=60.0, own_cpu_percent=180.0, mem_used=2**30, mem_total=2**32, ts=T0 + 1))
    printer.finish(0, None)
    line = next(row for row in out.getvalue().splitlines() if "telemetry:" in row)
    assert "ours 45% of the host" in line and "180%" not in line, line
    assert "% of the whole machine" in HELP and "0-100 %" in HELP


@pytest.mark.slow
async def test_the_recording_path_is_in_the_warnings_panel_whole_not_over_it(tmp_path: Path) -> None:
    """The recording's path is in the warnings panel, whole, broken only after a folder's slash at
    80 columns; not in a toast, which would cover the warnings."""
    from tests.tui.synthetic import session_events
    from tests.tui.test_app_pilot import live_app, panel_text, publish
    from tui.widgets.notices import NoticesPanel

    path = tmp_path / "a_rather_long_folder_name" / "recordings" / "cpu_0gpu_local_20240101T000000Z.sqlite"
    app, source, _ = live_app(recording=path)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events(finish_levels=1, end=False))
        app.drain()
        await pilot.pause(0.3)
        assert not any(str(path.resolve()) in n.message for n in app._notifications)
        text = panel_text(app.screen.query_one(NoticesPanel))
        lines = [line.strip() for line in text.splitlines()]
        start = next(i for i, line in enumerate(lines) if line.startswith("recording to"))
        shown = "".join(lines[start:]).removeprefix("recording to").split("(?", 1)[0].strip()
        assert shown == str(path.resolve()), lines[start:]
        for line in lines[start:-1]:  # each line breaks after a folder's slash, never inside a name
            assert line.endswith("/") or line == "recording to", lines[start:]
