"""How a run ended: its status ("ok", "failed", "interrupted"), one line saying why, and the
exit code, as a pure function of what happened.

``RunLedger`` folds the events a session publishes into the facts its end depends on (levels,
the first fatal error, a recording that could not be written); the conductor adds what only it
knows (a stop was asked for, the plan ended early); ``outcome`` decides. First match wins:

1. an exception ended the run: bad input (2), anything else failed (1)
2. the recording could not be written: failed (1)
3. a part died (load worker, server): failed (1), even when a stop came after
4. stopped (quit, signal) in the middle of a job, or before a headless plan's end: interrupted (130)
5. a level failed: failed (1), "F of P levels failed (U not run; level L: its first error)"
6. the plan ended early and nobody asked it to stop: failed (1)
7. a level missed one of its servers (degraded): failed (1)
8. a gate failed: failed (3)
9. ok (0); the line says so when no level was stable

A run that did not finish never ends "ok". Where a scale-out's server died under the run (the
others went on), the line of 5-7 leads with it: it is why.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from engine import events as ev
from engine.analysis.gates import gate_exit_code
from engine.analysis.stability import none_stable
from engine.errors import RunFailed, UserError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_GATES, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
RECORD_SOURCE = "record"  # the source of the recorder's own fatal error
WHY_CHARS = 90  # a failed level's error on the run's last line: its start (the level's own line has it all)


@dataclass(frozen=True)
class RunFacts:
    """Everything the end of a run depends on."""

    level_statuses: tuple[ev.LevelStatus, ...] = ()  # each level's status, in order
    planned_levels: int = 0  # levels the sweeps were asked to run
    record_error: str | None = None  # the recording stopped: why
    fatal_error: str | None = None  # the first part that died: "source: message"
    stop_asked: bool = False  # quit, a signal, a hang-up, or a part that died
    interactive: bool = False  # the TUI: the session waits for requests after its plan
    stopped_mid_job: bool = False  # the stop came while a sweep or probe ran
    incomplete: str | None = None  # the plan did not run to its end, and nobody asked it to stop
    degraded: tuple[tuple[float, str], ...] = ()  # (level, why) of each level that missed a server
    first_failure: tuple[float, str] | None = None  # (level, its first error) of the first failed level
    servers_lost: tuple[str, ...] = ()  # each server of several that died under the run: "server 2 of 2 ... exited (...)"
    gate_failures: tuple[str, ...] = ()
    raised: BaseException | None = None  # the exception that ended the run, if one did


@dataclass(frozen=True)
class Outcome:
    status: ev.SessionStatus
    error: str | None
    exit_code: int


def outcome(facts: RunFacts) -> Outcome:
    """The run's end from its facts; the module docstring gives the order."""
    exc = facts.raised
    if isinstance(exc, UserError):
        return Outcome("failed", str(exc), EXIT_BAD_INPUT)
    if isinstance(exc, RunFailed):
        return Outcome("failed", str(exc), EXIT_FAILED)
    if exc is not None:
        return Outcome("failed", f"{type(exc).__name__}: {exc}", EXIT_FAILED)
    if facts.record_error:
        return Outcome("failed", facts.record_error, EXIT_FAILED)
    if facts.fatal_error:
        return Outcome("failed", facts.fatal_error, EXIT_FAILED)
    if facts.stop_asked and (not facts.interactive or facts.stopped_mid_job):
        return Outcome("interrupted", None, EXIT_INTERRUPTED)
    lost = "".join(f"{server}; " for server in facts.servers_lost)
    failed = sum(1 for status in facts.level_statuses if status == "failed")
    if failed:
        planned = max(facts.planned_levels, len(facts.level_statuses))
        unrun = planned - len(facts.level_statuses)
        notes = [f"{unrun} not run"] if unrun else []
        if facts.first_failure:  # the user reads why on the last line, not only on the level's own
            first, message = facts.first_failure
            notes.append(f"level {first:g}: {message[:WHY_CHARS]}")
        return Outcome("failed", f"{lost}{failed} of {planned} levels failed" + (f" ({'; '.join(notes)})" if notes else ""),
                       EXIT_FAILED)
    if facts.incomplete:
        return Outcome("failed", f"{lost}{facts.incomplete}", EXIT_FAILED)
    if facts.degraded:
        level, why = facts.degraded[0]
        return Outcome("failed", f"{lost}{len(facts.degraded)} level(s) degraded, missing an endpoint "
                       f"(level {level:g}: {why})", EXIT_FAILED)
    if facts.gate_failures:  # exit 2 where a gate could not be judged and none failed
        return Outcome("failed", f"{len(facts.gate_failures)} gate(s) failed: " + "; ".join(facts.gate_failures),
                       gate_exit_code(facts.gate_failures))
    return Outcome("ok", none_stable(facts.level_statuses) or None, EXIT_OK)


class RunLedger:
    """The events' share of the facts, folded as they are published (from any thread)."""

    def __init__(self) -> None:
        self.levels: list[ev.LevelResult] = []
        self.record_error: str | None = None
        self.fatal_error: str | None = None
        self.measured = False  # a level or probe result: a recording worth keeping
        self._lock = threading.Lock()

    def apply(self, event: ev.Event) -> None:
        if isinstance(event, (ev.LevelResult, ev.ProbeResult, ev.AllReduceResult)):
            with self._lock:
                self.measured = True
                if isinstance(event, ev.LevelResult):
                    if event.trial > 1:  # a level measured again: its last trial stands
                        self.levels = [r for r in self.levels if not (r.index == event.index and r.level == event.level)]
                    self.levels.append(event)
        elif isinstance(event, ev.Error) and event.fatal:
            with self._lock:
                if event.source == RECORD_SOURCE and self.record_error is None:
                    self.record_error = event.message
                if self.fatal_error is None:
                    self.fatal_error = f"{event.source}: {event.message}"

    def statuses(self) -> tuple[ev.LevelStatus, ...]:
        with self._lock:
            return tuple(r.status for r in self.levels)

    def first_failure(self) -> tuple[float, str] | None:
        with self._lock:
            failed = next((r for r in self.levels if r.status == "failed"), None)
        if failed is None:
            return None
        return failed.level, (failed.error_messages[0] if failed.error_messages else
                              ", ".join(f"{k} x{n}" for k, n in failed.errors_by_kind.items()) or "no request answered")

    def degraded(self) -> tuple[tuple[float, str], ...]:
        with self._lock:
            return tuple((r.level, r.degraded) for r in self.levels if r.degraded)
