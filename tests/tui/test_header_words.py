"""Headers say what is so: a session that finished with a caveat is not a plain "✓ finished", a
study with no config running shows no "(-)", and a time left not known yet is not "about
estimating left", and one known is a range."""

from __future__ import annotations

from engine import events as ev
from engine.analysis.time_left import TimeLeft
from tests.tui.synthetic import session_events
from tui.state import SessionState
from tui.study_headless import running_config, time_left_text
from tui.widgets.status import summary_line


def _ended(error: str | None, status: str = "ok") -> str:
    state = SessionState()
    state.apply_all([*session_events(finish_levels=2, end=False),
                     ev.SessionEnded(status=status, error=error, exit_code=0 if status == "ok" else 1)])
    return summary_line(state, 200).plain


def test_finished_with_a_caveat_is_not_a_plain_tick():
    line = _ended("no level was stable (0 of 2): measure again before sizing on these figures")
    assert line.startswith("⚠ finished: no level was stable") and "✓" not in line
    assert _ended(None).startswith("✓ finished ")
    assert _ended("the server died", status="failed").startswith("✗ failed the server died")


def test_time_left_and_the_running_config():
    assert time_left_text(None) == "time left not known yet"
    assert time_left_text(TimeLeft(100.0, 250.0, None)) == "≈4m10s left (at least 1m40s)"
    assert time_left_text(TimeLeft(100.0, 250.0, 900.0), " for the whole study") == \
        "≈4m10s left for the whole study (1m40s–15m00s)"
    assert running_config(None) == "" and running_config("cpu2") == " (cpu2)"
