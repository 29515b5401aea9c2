"""Open a recording: check that it is one (and one this version can read), then read its
metadata and events. Every way a file can be wrong ends in a one-line UserError."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from engine.errors import (
    RecordingError as RecordingError,  # re-exported: readers catch it from here
)
from engine.events import (
    Event,
    EventSchemaError,
    NotJson,
    UnknownEventKind,
    event_from_dict,
    event_from_json,
)
from engine.profiles import SECTIONS
from engine.record.schema import APPLICATION_ID, RECORDING_SCHEMA, REQUIRED_TABLES, SQLITE_MAGIC
from engine.record.summary import RecordingSummary, summarize

HEADER_BYTES = 100


def wal_missing(path: Path, header: bytes) -> bool:
    """The file was left in WAL mode (its writer never closed it: a crash, or a copy taken while
    it ran) and its -wal file is not beside it: the events not yet checkpointed are elsewhere."""
    wal = Path(f"{path}-wal")
    try:  # an empty one is what a reader's earlier visit left: just as missing
        present = wal.stat().st_size > 0
    except OSError:
        present = False
    return len(header) > 19 and header[18] == 2 and not present


def _missing_wal_line(path: Path) -> str:
    return (f"{path}: the -wal file next to it ({path.name}-wal) is missing: the events after its last "
            "checkpoint are not in this copy (copy both files together)")


def _check_header(path: Path) -> bytes:
    """Cheap checks on the SQLite header that catch text files and truncated copies before
    SQLite reports them as something vaguer later."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block open() forever
            raise RecordingError(f"{path}: not a regular file (a pipe, socket or device), not a recording")
        size = info.st_size
        with open(path, "rb") as fh:
            header = fh.read(HEADER_BYTES)
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if size == 0:
        raise RecordingError(f"{path}: empty file, not a gpuscale-tui recording")
    if not header.startswith(SQLITE_MAGIC):
        raise RecordingError(f"{path}: not a gpuscale-tui recording (not an SQLite file)")
    if len(header) < HEADER_BYTES:
        raise RecordingError(f"{path}: truncated recording ({size} bytes, shorter than its header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise RecordingError(f"{path}: corrupt recording (invalid page size {page_size})")
    page_count = int.from_bytes(header[28:32], "big")
    count_valid = header[24:28] == header[92:96]  # SQLite: the in-header size is valid then
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        count_valid = False  # a crashed writer's WAL completes the file: SQLite reads it on open
    if size % page_size or (count_valid and page_count and size < page_count * page_size):
        raise RecordingError(
            f"{path}: truncated recording ({size} bytes; its header expects {page_count * page_size})"
        )
    return header


def connect_read_only(path: Path) -> sqlite3.Connection:
    """Read-only: opening a recording never changes it (WAL frames of a crashed or live writer
    are read, not checkpointed)."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


class Recording:
    def __init__(self, path: Path, conn: sqlite3.Connection, schema: int, metadata: dict[str, Any]) -> None:
        self.path = path
        self._conn = conn
        self.schema = schema
        self.metadata = metadata
        self.unknown_events = 0  # events of kinds this version does not know (a newer minor)
        self.notes: list[str] = []  # things a reader should be told (one line each): a missing -wal

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Recording:
        path = Path(path).expanduser()
        try:
            if not path.exists():
                raise RecordingError(f"{path}: no such recording")
            if path.is_dir():
                raise RecordingError(f"{path}: is a folder, not a recording file")
        except OSError as exc:  # a name too long for the file system, a loop of links
            raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from None
        header = _check_header(path)
        no_wal = wal_missing(path, header)
        try:
            recording = cls._open(path)
        except RecordingError:
            if no_wal:  # nothing was checkpointed yet: everything is in the -wal that is not here
                raise RecordingError(_missing_wal_line(path)) from None
            raise
        if no_wal and "status" not in recording.metadata:
            recording.notes.append(_missing_wal_line(path))
        return recording

    @classmethod
    def _open(cls, path: Path) -> Recording:
        conn: sqlite3.Connection | None = None
        try:
            conn = connect_read_only(path)
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            schema = conn.execute("PRAGMA user_version").fetchone()[0]
            if app_id != APPLICATION_ID:
                raise RecordingError(f"{path}: an SQLite database, but not a gpuscale-tui recording")
            if schema > RECORDING_SCHEMA:
                raise RecordingError(
                    f"{path}: recording schema v{schema} is newer than this tool's (v{RECORDING_SCHEMA}); "
                    "upgrade gpuscale-tui to read it"
                )
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if schema < 1 or not REQUIRED_TABLES <= tables:
                raise RecordingError(f"{path}: incomplete recording (created but never initialised)")
            metadata = _checked_metadata(
                {key: json.loads(value) for key, value in conn.execute("SELECT key, value FROM meta")})
            conn.execute("SELECT max(seq) FROM events").fetchone()  # touches the table's pages
        except RecordingError:
            if conn is not None:
                conn.close()
            raise
        except (sqlite3.Error, ValueError) as exc:
            if conn is not None:
                conn.close()
            raise RecordingError(f"{path}: corrupt or unreadable recording: {_one_line(exc)}") from None
        return cls(path, conn, schema, metadata)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        """Rows of a read-only SQL query (the summary's aggregates); errors as RecordingError."""
        try:
            yield from self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise RecordingError(f"{self.path}: corrupt or unreadable recording: {_one_line(exc)}") from None

    def rows(self, kinds: tuple[str, ...] | None = None, after_seq: int = 0,
             exclude: tuple[str, ...] = ()) -> Iterator[tuple[int, float, str, dict[str, Any]]]:
        """(seq, ts, kind, event dict), in publication order; the JSON parsed, not decoded."""
        sql = "SELECT seq, ts, kind, data FROM events WHERE seq > ?"
        params: tuple[Any, ...] = (after_seq,)
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            params += tuple(kinds)
        if exclude:
            sql += f" AND kind NOT IN ({','.join('?' * len(exclude))})"
            params += tuple(exclude)
        for seq, ts, kind, data in self.query(sql + " ORDER BY seq", params):
            yield seq, ts, kind, self.parse(seq, kind, data)

    def parse(self, seq: int, kind: str, data: str | bytes) -> Any:
        """A row's JSON as Python's values; msgspec first (quicker), Python's json for what only it
        reads (NaN)."""
        try:
            return msgspec.json.decode(data)
        except msgspec.DecodeError:
            pass
        try:
            return json.loads(data)
        except (ValueError, TypeError):
            raise RecordingError(f"{self.path}: corrupt event #{seq} ({kind}): not JSON") from None

    def raw_rows(self, after_seq: int = 0, exclude: tuple[str, ...] = ()) -> Iterator[tuple[int, float, str, str]]:
        """(seq, ts, kind, JSON text) after ``after_seq``, but those of the ``exclude``d kinds: for
        readers that decode straight from the text, or parse lazily."""
        sql = "SELECT seq, ts, kind, data FROM events WHERE seq > ?"
        if exclude:
            sql += f" AND kind NOT IN ({','.join('?' * len(exclude))})"
        yield from self.query(sql + " ORDER BY seq", (after_seq, *exclude))

    def decode(self, seq: int, data: dict[str, Any] | str | bytes, kind: str = "") -> Event | None:
        """The event of a row (its JSON text, decoded straight from it, or a table already parsed),
        or None for a kind this version does not know (counted, skipped)."""
        try:
            return event_from_dict(data) if isinstance(data, dict) else event_from_json(data)
        except NotJson:
            raise RecordingError(f"{self.path}: corrupt event #{seq} ({kind}): not JSON") from None
        except UnknownEventKind:
            self.unknown_events += 1
            return None
        except EventSchemaError as exc:
            raise RecordingError(f"{self.path}: event #{seq}: {exc}") from None

    def events(self, kinds: tuple[str, ...] | None = None) -> Iterator[Event]:
        sql = "SELECT seq, kind, data FROM events"
        if kinds:
            sql += f" WHERE kind IN ({','.join('?' * len(kinds))})"
        for seq, kind, data in self.query(sql + " ORDER BY seq", tuple(kinds or ())):
            event = self.decode(seq, data, kind)
            if event is not None:
                yield event

    def event_counts(self) -> dict[str, int]:
        return {kind: n for kind, n in self.query("SELECT kind, count(*) FROM events GROUP BY kind")}

    def summary(self) -> RecordingSummary:
        return summarize(self)


_META_TABLES = ("profile", "server", "host", "versions", "model_config")
_META_TEXTS = ("session_id", "profile_name", "mode", "status", "tool_version")


def _checked_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Metadata of the wrong shape (a table that is a number, a name that is a list) is dropped as
    "not recorded": every reader (summary, report, compare, the screens) may then trust its types."""
    out = dict(meta)
    for key in _META_TABLES:
        if key in out and not isinstance(out[key], dict):
            del out[key]
    for key in _META_TEXTS:
        if key in out and not isinstance(out[key], str):
            del out[key]
    profile = out.get("profile")
    if isinstance(profile, dict):
        out["profile"] = {k: v for k, v in profile.items() if k not in SECTIONS or isinstance(v, dict)}
    return out


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
