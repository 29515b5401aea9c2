"""Replay: a recording as an event source, so the TUI renders it exactly as it rendered the live
session. Play, pause, speed (x1, x2, x10, max), seek to a time or a level, step.

One thread publishes, in recorded order and at recorded pace scaled by the speed; controls from
other threads only change state and wake it, so events never interleave. Seeking backwards
publishes ReplayReset (screens clear their state) and then every event up to the target at
once. A file still being written is followed: at its end the source polls for new rows until a
SessionEnded arrives or it is stopped.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

from engine.bus import EventBus
from engine.errors import UserError
from engine.events import (
    Error,
    EventSchemaError,
    NotJson,
    ReplayReset,
    UnknownEventKind,
    Warning,
    event_from_json,
)
from engine.record.reader import Recording, RecordingError
from engine.record.summary import MAX_TS
from engine.source import EventSource

POLL_S = 0.2  # how often the end of a growing file is re-read
WAITING_NOTICE_S = 3.0  # a live writer commits every 0.5 s: this long without rows is worth saying
PUBLISH_CHECK_EVERY = 256  # during an instant catch-up, look at stop() this often
# At max speed, publishing waits while the screen holds this many events it has not folded in yet:
# a thread decoding far ahead of what is shown only takes the GIL from the screen's keys.
MAX_BACKLOG = 500
BACKLOG_WAIT_S = 0.01


def due_in(offset: float, anchor_pos: float, anchor_wall: float, now: float, speed: float | None) -> float:
    """Seconds of wall time until the event at ``offset`` (seconds into the recording) is due,
    when the playback clock read ``anchor_pos`` at wall time ``anchor_wall``. <= 0: due now."""
    if speed is None:
        return 0.0
    return anchor_wall + (offset - anchor_pos) / speed - now


def _check_speed(speed: float | None) -> float | None:
    if speed is None:
        return None
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not math.isfinite(speed) or speed <= 0:
        raise UserError(f"replay speed must be a number > 0 (or max), found {speed!r}")
    return float(speed)


class ReplaySource(EventSource):
    def __init__(
        self,
        path: Path,
        bus: EventBus | None = None,
        speed: float | None = 1.0,
        *,
        paused: bool = False,
        linger: bool = True,
        idle_timeout_s: float | None = None,
    ) -> None:
        """``speed`` None plays as fast as possible. ``linger``: after the last event, stay
        alive so that the screen can still seek back (until stop()); False ends the source.
        ``idle_timeout_s``: give up on a file without a SessionEnded after this long without
        new rows (None: follow it until stopped)."""
        super().__init__(bus)
        self.path = Path(path)
        self._speed = _check_speed(speed)
        self._recording = Recording.open(self.path)
        self._linger = linger
        self._idle_timeout_s = idle_timeout_s
        self._cond = threading.Condition()
        self._rows: list[tuple[float, str, str]] = []  # (offset, kind, JSON text)
        self._level_starts: list[float] = []  # every LevelStarted's offset: each trial, each sweep
        self._last_seq = 0
        self._t0: float | None = None
        self._ended = False  # a SessionEnded is among the rows
        self._next = 0  # index of the next row to publish
        self._paused = paused
        self._stopped = False
        self._seek_to: float | None = None
        self._target: float | None = None  # the last seek asked for, until it is done
        self._steps = 0
        self._anchor_pos = 0.0
        self._anchor_wall = time.monotonic()
        self._last_new_rows = time.monotonic()
        self._warned_waiting = False
        self._backlog: Callable[[], int] | None = None
        self.error: str | None = None  # why the replay failed: one line
        self._load_new_rows()

    def pace_by(self, backlog: Callable[[], int]) -> None:
        """At max speed, publish no further ahead of the consumer than MAX_BACKLOG events:
        ``backlog`` says how many it holds unread (a screen's queue; called from this thread)."""
        self._backlog = backlog

    # ------------------------------------------------------------------ controls (any thread)

    def pause(self) -> None:
        with self._cond:
            if not self._paused:
                self._anchor_pos = self._clock()
                self._paused = True
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            if self._paused:
                self._anchor_wall = time.monotonic()
                self._paused = False
            self._cond.notify_all()

    def set_speed(self, speed: float | None) -> None:
        """x1, x2, x10 ... or None for as fast as possible."""
        speed = _check_speed(speed)
        with self._cond:
            self._anchor_pos, self._anchor_wall = self._clock(), time.monotonic()
            self._speed = speed
            self._cond.notify_all()

    def seek(self, seconds_from_start: float) -> None:
        if not isinstance(seconds_from_start, (int, float)) or not math.isfinite(seconds_from_start):
            raise UserError(f"seek target must be a number of seconds, found {seconds_from_start!r}")
        with self._cond:
            self._seek_to = self._target = min(max(float(seconds_from_start), 0.0), self.duration_s)
            self._cond.notify_all()

    def seek_level(self, index: int) -> None:
        """To the recording's level start ``index`` (0-based, its LevelStarted included). Every
        LevelStarted counts, in recorded order: a level measured again (its trial 2) and a later
        sweep's levels are starts of their own, so stepping through them visits each one."""
        if not 0 <= index < len(self._level_starts):
            have = f"levels 0..{len(self._level_starts) - 1}" if self._level_starts else "no levels yet"
            raise UserError(f"no level {index} in this recording ({have})")
        self.seek(self._level_starts[index])

    def step(self) -> None:
        """Publish the next event, then stay paused."""
        with self._cond:
            self._steps += 1
            if not self._paused:
                self._anchor_pos = self._clock()
                self._paused = True
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is None:  # never started: nobody else will close the file
            self._recording.close()

    # ------------------------------------------------------------------ state (any thread)

    @property
    def position_s(self) -> float:
        """Where playback is; while a seek is under way, where it is going: three quick seeks
        of 10 s then add up to 30 s instead of each starting from the old position."""
        with self._cond:
            return self._target if self._target is not None else self._clock()

    @property
    def seeking(self) -> bool:
        """A seek is asked for and its events are not all published yet."""
        return self._target is not None

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last event read so far (grows while a file is live)."""
        return self._rows[-1][0] if self._rows else 0.0

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def speed(self) -> float | None:
        return self._speed

    @property
    def finished(self) -> bool:
        """Every event published, and the recording has its SessionEnded."""
        return self._ended and self._next >= len(self._rows)

    @property
    def waiting(self) -> bool:
        """At the end of a recording that has no SessionEnded yet (live, or interrupted)."""
        return not self._ended and self._next >= len(self._rows)

    @property
    def levels(self) -> dict[int, float]:
        """Level start (seek_level's index) -> seconds from start, for a level picker."""
        return dict(enumerate(self._level_starts))

    # ------------------------------------------------------------------ the replay thread

    def _clock(self) -> float:
        """The playback clock (call with the condition held)."""
        if self._speed is None:  # as fast as possible: where publishing has got to
            last = self._rows[self._next - 1][0] if self._next else 0.0
            return max(last, self._anchor_pos)
        if self._paused:
            return self._anchor_pos
        pos = self._anchor_pos + (time.monotonic() - self._anchor_wall) * self._speed
        return min(pos, self.duration_s)

    def _load_new_rows(self) -> int:
        added = 0
        for seq, ts, kind, text in self._recording.raw_rows(self._last_seq):
            if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or abs(ts) > MAX_TS:
                raise RecordingError(f"{self.path}: corrupt events row (seq {seq}): ts is {str(ts)[:40]!r}, not a number")
            if self._t0 is None:
                self._t0 = ts
            offset = max(ts - self._t0, 0.0)
            if kind == "level_started":
                self._level_starts.append(offset)
            elif kind == "session_ended":
                self._ended = True
            self._rows.append((offset, kind, text))
            self._last_seq = seq
            added += 1
        if added:
            self._last_new_rows = time.monotonic()
        return added

    def _publish_row(self, index: int) -> bool:
        _offset, kind, text = self._rows[index]
        try:
            event = event_from_json(text)  # straight from the row's JSON
        except NotJson:
            self._fail(f"{self.path.name}: corrupt {kind} event")
            return False
        except UnknownEventKind:
            return True  # a kind from a newer minor version: skip it
        except EventSchemaError as exc:
            self._fail(f"{self.path.name}: {exc}")  # a corrupt recording is bad input: never "done"
            return False
        except ValueError:
            self._fail(f"{self.path.name}: corrupt {kind} event")
            return False
        self.bus.publish(event)
        return True

    def _publish_until(self, target: float) -> bool:
        """Every unpublished event at or before ``target``, at once."""
        count = 0
        while self._next < len(self._rows) and self._rows[self._next][0] <= target:
            if not self._publish_row(self._next):
                return False
            self._next += 1
            count += 1
            if count % PUBLISH_CHECK_EVERY == 0 and self._stopped:
                return False
        return True

    def _do_seek(self, target: float) -> bool:
        if self._next and target < self._rows[self._next - 1][0]:
            self.bus.publish(ReplayReset(position_s=target))
            self._next = 0
        ok = self._publish_until(target)
        with self._cond:
            self._anchor_pos, self._anchor_wall = target, time.monotonic()
            if self._seek_to is None:  # no newer seek queued meanwhile
                self._target = None
        return ok

    def _run(self) -> None:
        try:
            first = next(self._recording.query("SELECT ts FROM events ORDER BY seq LIMIT 1"), (None,))[0]
            for note in self._recording.notes:  # e.g. a copy without its -wal file: say what is missing
                warning = Warning(source="replay", message=note, key="replay.note")
                if isinstance(first, (int, float)):
                    warning.ts = first
                self.bus.publish(warning)
            self._loop()
        except UserError as exc:  # the file went bad under us (truncated while replaying)
            self._fail(str(exc), exc.exit_code)
        except Exception as exc:  # noqa: BLE001 - a doctored event the decoder let through: a failed replay, one line
            self._fail(f"{self.path.name}: replay stopped: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
        finally:
            self._recording.close()

    def _fail(self, message: str, exit_code: int = 2) -> None:
        self.error = message
        self.exit_code = exit_code
        self.bus.publish(Error(source="replay", message=message, fatal=True, ts=self._recording_now()))

    def _loop(self) -> None:
        with self._cond:
            self._anchor_wall = time.monotonic()
        while True:
            with self._cond:
                if self._stopped:
                    return
                seek, self._seek_to = self._seek_to, None
                step = seek is None and self._steps > 0  # a pending seek goes first; the step waits
                if step:
                    self._steps -= 1
            if seek is not None:
                if not self._do_seek(seek):
                    return
                continue
            if self._next >= len(self._rows) and not self._ended:
                if self._load_new_rows() == 0 and not self._wait_for_writer():
                    return
            if step:
                if self._next < len(self._rows):
                    if not self._publish_row(self._next):
                        return
                    with self._cond:
                        self._anchor_pos = max(self._anchor_pos, self._rows[self._next][0])
                    self._next += 1
                continue
            with self._cond:
                if self._stopped:
                    return
                if self._paused:
                    self._cond.wait(POLL_S)
                    continue
                if self._next >= len(self._rows):
                    if self._ended and not self._linger:
                        return
                    self._cond.wait(POLL_S)
                    continue
                if self._speed is None and self._backlog is not None and self._backlog() >= MAX_BACKLOG:
                    self._cond.wait(BACKLOG_WAIT_S)  # the screen is behind: let it catch up
                    continue
                wait = due_in(self._rows[self._next][0], self._anchor_pos, self._anchor_wall, time.monotonic(),
                              self._speed)
                if wait > 0:
                    self._cond.wait(min(wait, POLL_S) if not self._ended else wait)
                    continue
            if not self._publish_row(self._next):
                return
            self._next += 1

    def _recording_now(self) -> float:
        """The recording's clock at the last event published: replay's own notices carry it, so
        that a screen's elapsed time stays the recording's (not the hours since it was made)."""
        if self._t0 is None:
            return time.time()
        return self._t0 + (self._rows[self._next - 1][0] if 0 < self._next <= len(self._rows) else 0.0)

    def _wait_for_writer(self) -> bool:
        """At the end of a file without SessionEnded: say so once; False to give up."""
        idle = time.monotonic() - self._last_new_rows
        notice_after = WAITING_NOTICE_S if self._idle_timeout_s is None else min(WAITING_NOTICE_S, self._idle_timeout_s / 2)
        if not self._warned_waiting and idle >= notice_after:
            self._warned_waiting = True
            self.bus.publish(Warning(source="replay", key="replay.waiting", ts=self._recording_now(),
                                     message=f"{self.path.name} has no end yet: waiting for new events "
                                             "(still being written, or the session was interrupted)"))
        if self._idle_timeout_s is not None and idle >= self._idle_timeout_s:
            self.bus.publish(Warning(source="replay", key="replay.gave_up", ts=self._recording_now(),
                                     message=f"{self.path.name}: no new events for {idle:.0f} s; replay stopped"))
            return False
        return True
