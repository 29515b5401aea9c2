"""Recordings made before the events moved to msgspec Structs still read and replay: every row
of tests/data/events_v1_rows.jsonl was written by the recorder of that time (the event's
``dataclasses.asdict`` with "kind" and "v" appended, by ``json.dumps``), one or more of every kind,
with every nested record. Decoded straight from those bytes, each event holds what its row said,
field for field; the summary and a replay at max speed read the file as they read a new one."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from engine.events import event_kinds
from engine.record.reader import Recording
from engine.record.replay_source import ReplaySource
from engine.record.schema import APPLICATION_ID, DDL, RECORDING_SCHEMA

ROWS = Path(__file__).resolve().parents[2] / "data" / "events_v1_rows.jsonl"


@pytest.fixture(scope="module")
def old_rows() -> list[str]:
    return ROWS.read_text(encoding="utf-8").splitlines()


@pytest.fixture
def old_recording(tmp_path: Path, old_rows: list[str]) -> Path:
    path = tmp_path / "before_msgspec.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {RECORDING_SCHEMA}")
        conn.executescript(DDL)
        conn.executemany("INSERT INTO events (ts, kind, data) VALUES (?, ?, ?)",
                         [(json.loads(r)["ts"], json.loads(r)["kind"], r) for r in old_rows])
    return path


def test_the_rows_cover_every_kind_written(old_rows: list[str]) -> None:
    kinds = {json.loads(r)["kind"] for r in old_rows}
    assert kinds == set(event_kinds()) - {"replay_reset"}  # replay_reset is never recorded
    assert all(r.endswith(',"v":1}') for r in old_rows)  # the old layout: kind and v last


def _as_written(decoded: object, written: object) -> object:
    """``decoded`` without the fields added since ``written`` was, where they read None (not
    measured); a field added with a value is kept, so the comparison fails on it."""
    if isinstance(decoded, dict) and isinstance(written, dict):
        return {k: _as_written(v, written.get(k)) for k, v in decoded.items() if k in written or v is not None}
    if isinstance(decoded, list) and isinstance(written, list) and len(decoded) == len(written):
        return [_as_written(d, w) for d, w in zip(decoded, written, strict=True)]
    return decoded


def test_every_old_row_decodes_to_what_it_says(old_recording: Path, old_rows: list[str]) -> None:
    with Recording.open(old_recording) as recording:
        events = list(recording.events())
        assert recording.unknown_events == 0
    assert len(events) == len(old_rows)
    for event, row in zip(events, old_rows, strict=True):
        # every field, nothing lost; a field added since (sequence, cache, cached tokens) reads None
        assert _as_written(event.to_dict(), json.loads(row)) == json.loads(row), event.kind


def test_an_old_recording_summarises_and_replays(old_recording: Path, old_rows: list[str]) -> None:
    with Recording.open(old_recording) as recording:
        summary = recording.summary()
        expected = list(recording.events())
    assert summary.levels  # the sweep's levels were read from the old rows
    source = ReplaySource(old_recording, speed=None, linger=False)
    got: list = []
    source.bus.subscribe(got.append)
    source.start()
    assert source.join(30)
    assert got == expected and source.finished
