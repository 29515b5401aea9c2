import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.events import Event, ReplayReset, SessionEnded, Warning
from engine.record.reader import Recording
from engine.record.recorder import Recorder
from engine.record.replay_source import ReplaySource, due_in
from tests.engine.record.synthetic_recordings import synthetic_session


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def _source(path: Path, **kwargs) -> tuple[ReplaySource, list[Event]]:
    source = ReplaySource(path, **kwargs)
    got: list[Event] = []
    source.bus.subscribe(got.append)
    return source, got


def _recorded(path: Path) -> list[Event]:
    with Recording.open(path) as r:
        return list(r.events())


def test_due_in() -> None:
    # clock read 10 s at wall 100; an event at 14 s is due at wall 104 at x1, 102 at x2, 100.4 at x10
    assert due_in(14.0, 10.0, 100.0, 100.0, 1.0) == pytest.approx(4.0)
    assert due_in(14.0, 10.0, 100.0, 101.0, 2.0) == pytest.approx(1.0)
    assert due_in(14.0, 10.0, 100.0, 100.0, 10.0) == pytest.approx(0.4)
    assert due_in(9.0, 10.0, 100.0, 100.0, 1.0) < 0  # in the past: due now
    assert due_in(1e9, 0.0, 0.0, 0.0, None) == 0.0  # max speed: everything is due


def test_max_speed_replays_everything_in_order(recording_4x: Path) -> None:
    source, got = _source(recording_4x, speed=None, linger=False)
    source.start()
    assert source.join(30)
    assert got == _recorded(recording_4x)
    assert source.finished and source.position_s == pytest.approx(source.duration_s)


def test_max_speed_paced_by_its_consumer_stays_within_the_backlog_then_ends_in_order(
        recording_4x: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A screen that has folded nothing holds a max-speed replay at MAX_BACKLOG events; as it
    reads them, the rest follows, every event once and in order."""
    from engine.record import replay_source

    MAX_BACKLOG = 100  # noqa: N806 - the module's constant, smaller than this recording
    monkeypatch.setattr(replay_source, "MAX_BACKLOG", MAX_BACKLOG)
    source, got = _source(recording_4x, speed=None, linger=False)
    read = [0]  # how many of ``got`` the consumer has taken

    def unread() -> int:
        return len(got) - read[0]

    source.pace_by(unread)
    total = len(_recorded(recording_4x))
    assert total > 2 * MAX_BACKLOG  # the recording is longer than the backlog
    source.start()
    assert wait_until(lambda: len(got) >= MAX_BACKLOG)
    time.sleep(0.3)  # time enough to publish the rest, were it not paced
    assert len(got) == MAX_BACKLOG and not source.finished
    while source.running and wait_until(lambda: unread() >= MAX_BACKLOG or not source.running, 30):
        read[0] = len(got)  # the screen folds what it holds
    assert source.join(30)
    assert got == _recorded(recording_4x)


@pytest.mark.slow
def test_paused_publishes_nothing_then_steps_one_at_a_time(recording_4x: Path) -> None:
    source, got = _source(recording_4x, speed=None, paused=True)
    source.start()
    try:
        time.sleep(0.3)
        assert got == []
        for n in (1, 2, 3):
            source.step()
            assert wait_until(lambda n=n: len(got) >= n)
        time.sleep(0.2)
        assert got == _recorded(recording_4x)[:3] and source.paused
    finally:
        source.stop()
        assert source.join(5)


@pytest.mark.slow
def test_seek_forward_then_back(recording_4x: Path) -> None:
    recorded = _recorded(recording_4x)
    t0 = recorded[0].ts
    source, got = _source(recording_4x, speed=1.0, paused=True)
    source.start()
    try:
        source.seek(100.0)
        expected = [e for e in recorded if e.ts - t0 <= 100.0]
        assert wait_until(lambda: len(got) >= len(expected))
        assert got == expected and not any(isinstance(e, ReplayReset) for e in got)
        assert source.position_s == pytest.approx(100.0)

        got.clear()
        source.seek(10.0)
        expected = [e for e in recorded if e.ts - t0 <= 10.0]
        assert wait_until(lambda: len(got) >= len(expected) + 1)
        assert isinstance(got[0], ReplayReset) and got[0].position_s == 10.0
        assert got[1:] == expected
    finally:
        source.stop()
        assert source.join(5)


def test_seek_level(recording_4x: Path) -> None:
    source, got = _source(recording_4x, speed=1.0, paused=True)
    source.start()
    try:
        source.seek_level(2)
        assert wait_until(lambda: any(e.kind == "level_started" and e.index == 2 for e in got))
        time.sleep(0.1)
        started = [e.index for e in got if e.kind == "level_started"]
        assert started == [0, 1, 2]
        at = next(i for i, e in enumerate(got) if e.kind == "level_started" and e.index == 2)
        assert all(e.ts == got[at].ts for e in got[at:])  # stops right at the level's start
        with pytest.raises(UserError, match="no level 7"):
            source.seek_level(7)
    finally:
        source.stop()
        assert source.join(5)


def test_speed_controls(recording_4x: Path) -> None:
    source = ReplaySource(recording_4x, speed=2.0)
    try:
        for bad in (0, -1, float("nan"), "fast"):
            with pytest.raises(UserError):
                source.set_speed(bad)  # type: ignore[arg-type]  # the wrong type on purpose
        source.set_speed(10)
        assert source.speed == 10.0
        source.set_speed(None)
        assert source.speed is None
        with pytest.raises(UserError):
            ReplaySource(recording_4x, speed=0)
    finally:
        source.stop()


@pytest.mark.slow
def test_follows_a_file_still_being_written(tmp_path: Path) -> None:
    events = synthetic_session()
    path = tmp_path / "live.sqlite"
    rec = Recorder(path)
    for e in events[:50]:
        rec(e)
    assert wait_until(lambda: len(_recorded(path)) == 50)
    source, got = _source(path, speed=None, linger=False)
    source.start()
    assert wait_until(lambda: len(got) == 50)

    def write_rest() -> None:
        for e in events[50:]:
            rec(e)
            time.sleep(0.001)
        rec.close()

    writer = threading.Thread(target=write_rest)
    writer.start()
    writer.join(30)
    assert source.join(30)  # ends at the recording's SessionEnded
    assert got == events and isinstance(got[-1], SessionEnded)


@pytest.mark.slow
def test_interrupted_recording_waits_then_gives_up(tmp_path: Path) -> None:
    events = [e for e in synthetic_session() if not isinstance(e, SessionEnded)][:20]
    path = tmp_path / "cut.sqlite"
    rec = Recorder(path)
    for e in events:
        rec(e)
    rec.close()
    source, got = _source(path, speed=None, idle_timeout_s=1.5)
    source.start()
    assert source.join(15)
    warnings = [e for e in got if isinstance(e, Warning)]
    assert got[:20] == events and source.waiting
    assert [w.key for w in warnings] == ["replay.waiting", "replay.gave_up"]
