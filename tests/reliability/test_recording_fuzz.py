"""A seeded fuzz of recordings: a valid recording with one event field given a wrong type or an
absurd value. Summary, every export format, compare and headless replay either work or end in a
one-line RecordingError (exit 2 at the command line), never another exception (a traceback)."""

from __future__ import annotations

import io
import json
import random
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
from rich.console import Console

from engine.errors import UserError
from engine.record.compare import compare, render_compare
from engine.record.exporters import export
from engine.record.reader import Recording
from engine.record.replay_source import ReplaySource
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tui.headless import HeadlessPrinter

SEED = 18
CASES = 150
# what a careless writer, a newer version or a bit flip might leave in a field
WRONG_VALUES = ["x", "", None, [], {}, [1, "a"], {"a": 1}, True, -1, 0, 1e308, -1e308, 2**70, 3.5, "NaN"]


@pytest.fixture(scope="module")
def base_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = SyntheticRun(levels=[1, 4, 16], windows_per_level=2, gpu_count=2, variant="2x")
    return record_events(tmp_path_factory.mktemp("fuzz") / "base.sqlite", synthetic_session(run))


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path inside an event's JSON (dict keys and list indexes), leaves and branches."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in ("kind", "v"):  # an unknown kind is a newer minor version: skipped by design
                found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            found += _paths(item, (*prefix, index))
    return found


def _set(data: object, path: tuple, value: object) -> None:
    for key in path[:-1]:
        data = data[key]  # type: ignore[index]  # a JSON tree: dicts and lists
    data[path[-1]] = value  # type: ignore[index]  # a JSON tree: dicts and lists


def _mutate(source: Path, target: Path, rng: random.Random) -> str:
    shutil.copy(source, target)
    with sqlite3.connect(target) as conn:
        rows = conn.execute("SELECT seq, kind, data FROM events WHERE kind NOT IN ('gpu_sample', 'host_sample')").fetchall()
        seq, kind, text = rng.choice(rows)
        data = json.loads(text)
        path = rng.choice(_paths(data))
        value = rng.choice(WRONG_VALUES)
        _set(data, path, value)
        conn.execute("UPDATE events SET data = ? WHERE seq = ?", (json.dumps(data), seq))
        if kind == "session_started" and path and path[0] == "profile":  # the meta copy a reader uses
            conn.execute("UPDATE meta SET value = ? WHERE key = 'profile'", (json.dumps(data["profile"]),))
    return f"{kind} #{seq}: {'.'.join(map(str, path))} = {value!r}"


def _replay_headless(path: Path) -> int:
    """What `replay --headless` does, in this process; any exception in its thread is a failure."""
    failures: list[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)
    try:
        source = ReplaySource(path, speed=None, linger=False, idle_timeout_s=0.5)
        printer = HeadlessPrinter(Console(file=io.StringIO(), width=160))
        source.bus.subscribe(printer)
        source.start()
        assert source.join(30), "headless replay did not end"
        printer.finish(source.exit_code, None)
        if printer.failure is not None:
            failures.append(printer.failure)
    finally:
        threading.excepthook = previous
    if failures:
        raise failures[0]
    return source.exit_code


def _use(path: Path, out: Path) -> None:
    with Recording.open(path) as recording:
        recording.summary()
        for fmt in ("json", "csv", "md", "html"):
            export(recording, fmt, out)
        with Recording.open(path) as other:
            render_compare(compare([recording, other], {}), "text")
    _replay_headless(path)


@pytest.mark.slow
def test_wrong_typed_event_fields_never_end_in_a_traceback(base_recording: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    problems: list[str] = []
    for case in range(CASES):
        path = tmp_path / f"case{case}.sqlite"
        what = _mutate(base_recording, path, rng)
        try:
            _use(path, tmp_path / f"out{case}")
        except UserError as exc:  # a one-line error is the right answer to a corrupt file
            assert "\n" not in str(exc), (what, str(exc))
        except Exception as exc:  # noqa: BLE001 - exactly what the test looks for
            problems.append(f"{what}: {type(exc).__name__}: {exc}")
    assert not problems, f"{len(problems)} of {CASES} cases ended in a traceback:\n" + "\n".join(problems[:20])


TELEMETRY_CASES = 120
NUMBERS_GONE_BAD = [*WRONG_VALUES, float("nan"), float("inf"), -float("inf"), -5.0, 1e20]


def _stored(value: object) -> object:
    """A value as SQLite can hold it: lists, tables and huge ints as their JSON text."""
    if isinstance(value, (list, dict)) or (isinstance(value, int) and abs(value) >= 2**63):
        return json.dumps(value)
    return value


def _mutate_telemetry(source: Path, target: Path, rng: random.Random) -> str:
    """One GPU or host sample event, level result, event timestamp or telemetry table cell
    given a wrong type or an absurd value."""
    shutil.copy(source, target)
    value = rng.choice(NUMBERS_GONE_BAD)
    with sqlite3.connect(target) as conn:
        where = rng.choice(["event", "ts", "gpu_samples", "host_samples"])
        if where == "event":
            seq, kind, text = rng.choice(conn.execute(
                "SELECT seq, kind, data FROM events WHERE kind IN ('gpu_sample', 'host_sample', 'level_result')"
            ).fetchall())
            data = json.loads(text)
            path = rng.choice(_paths(data))
            _set(data, path, value)
            conn.execute("UPDATE events SET data = ? WHERE seq = ?", (json.dumps(data), seq))
            return f"{kind} #{seq}: {'.'.join(map(str, path))} = {value!r}"
        if where == "ts":
            seq = rng.choice([row[0] for row in conn.execute("SELECT seq FROM events")])
            if value is None or value != value:
                value = "NaN"  # the column is NOT NULL (SQLite stores a float NaN as NULL)
            conn.execute("UPDATE events SET ts = ? WHERE seq = ?", (_stored(value), seq))
            return f"ts of #{seq} = {value!r}"
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({where})") if row[1] not in ("seq", "ts", "gpu")]
        column = rng.choice(columns)
        conn.execute(f"UPDATE {where} SET {column} = ? WHERE rowid IN "  # noqa: S608 - the test's own names
                     f"(SELECT rowid FROM {where} ORDER BY random() LIMIT 3)", (_stored(value),))
        return f"{where}.{column} = {value!r}"


@pytest.mark.slow
def test_wrong_typed_telemetry_and_timestamps_never_end_in_a_traceback(base_recording: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    problems: list[str] = []
    for case in range(TELEMETRY_CASES):
        path = tmp_path / f"case{case}.sqlite"
        what = _mutate_telemetry(base_recording, path, rng)
        try:
            _use(path, tmp_path / f"out{case}")
        except UserError as exc:
            assert "\n" not in str(exc), (what, str(exc))
        except Exception as exc:  # noqa: BLE001 - exactly what the test looks for
            problems.append(f"{what}: {type(exc).__name__}: {exc}")
    assert not problems, f"{len(problems)} of {TELEMETRY_CASES} cases ended in a traceback:\n" + "\n".join(problems[:20])
