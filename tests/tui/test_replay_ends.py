"""A replay ends: headless or with stdout a pipe, of a finished or a crashed recording; and a
crashed recording's replay keeps the recording's clock for its own notices."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.record.reader import Recording
from tests.cli_runner import run_cli
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = SyntheticRun(levels=[1, 4], windows_per_level=2, gpu_count=1, variant="1x")
    return record_events(tmp_path_factory.mktemp("r2") / "run.sqlite", synthetic_session(run))


@pytest.mark.slow
def test_headless_replay_ends_also_without_a_terminal(recording, tmp_path):
    crashed = tmp_path / "crashed.sqlite"
    shutil.copy(recording, crashed)
    with sqlite3.connect(crashed) as conn:  # a session that never ended
        conn.execute("DELETE FROM events WHERE kind = 'session_ended'")
        conn.execute("DELETE FROM meta WHERE key IN ('status', 'exit_code', 'ended_ts')")
    for args in (["replay", "--headless", str(recording)], ["replay", "--headless", str(crashed)],
                 ["replay", str(recording)]):  # plain replay, stdout a pipe: no terminal to draw on
        proc = run_cli(*args, timeout=60)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stdout + proc.stderr
        assert "level" in proc.stdout


@pytest.mark.slow
def test_replay_of_a_crashed_recording_keeps_the_recordings_clock(recording, tmp_path):
    """Replay's own notices (no end yet, gave up) carry the recording's time, not today's: the
    screen's elapsed time stays that of the recording (not the months since it was made)."""
    from engine.record.replay_source import ReplaySource
    from tui.state import SessionState

    crashed = tmp_path / "crashed.sqlite"
    shutil.copy(recording, crashed)
    with sqlite3.connect(crashed) as conn:
        conn.execute("DELETE FROM events WHERE kind = 'session_ended'")
        conn.execute("DELETE FROM meta WHERE key IN ('status', 'exit_code', 'ended_ts')")
    with Recording.open(crashed) as rec:
        duration = rec.summary().duration_s
    state = SessionState()
    source = ReplaySource(crashed, speed=None, linger=False, idle_timeout_s=0.6)
    source.bus.subscribe(state.apply)
    source.start()
    assert source.join(30)
    assert any("no end yet" in n.message for n in state.notices.values()), "the notice was not published"
    assert 0 < state.elapsed_s <= duration + 1e-6
