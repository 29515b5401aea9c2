"""The recorder: a bus subscriber that writes every event of a session to a new SQLite file.

The publisher never waits on the disk: ``__call__`` only puts the event on a queue; a writer
thread serialises, redacts, inserts and commits at least every ``COMMIT_INTERVAL_S``. A commit
in WAL mode is in the OS page cache once it returns, so ``kill -9`` of the app loses at most the
last interval. Every ``CHECKPOINT_INTERVAL_S`` and at each level's end the WAL is checkpointed
into the main file (PASSIVE: never waits on a reader), so a copy of the main file alone, or a
WAL damaged by a crash, still holds all but the last seconds. On ``close`` the WAL is checkpointed into the main file so the recording is one
self-contained file.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import queue
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from engine.errors import UserError
from engine.events import (
    SCHEMA_VERSION,
    Error,
    Event,
    InputDataUsed,
    ServerReady,
    SessionEnded,
    SessionStarted,
)
from engine.profiles import redact_server
from engine.record import gpu_fields
from engine.record.naming import recording_path
from engine.record.schema import APPLICATION_ID, DDL, NOT_RECORDED_KINDS, RECORDING_SCHEMA
from engine.redact import Redactor

COMMIT_INTERVAL_S = 0.5  # the brief: at least every second; half leaves room for a slow disk
MAX_QUEUED = 200_000  # beyond this the disk has stalled for minutes: drop rather than eat RAM
CHECKPOINT_INTERVAL_S = 2.0  # how much a crash may lose when the -wal file is lost with it
CHECKPOINT_KINDS = frozenset({"level_result", "sweep_finished", "probe_result", "session_ended"})
CLOSE_TIMEOUT_S = 30.0
BUSY_TIMEOUT_S = 30.0  # another process holding a lock on our file (a reader checkpointing) waits, not fails

_STOP = object()
_INSERT_GPU_SAMPLE = (
    f"INSERT INTO gpu_samples (seq, ts, gpu, {', '.join(f.column for f in gpu_fields.FIELDS)}) "
    f"VALUES (?, ?, ?{', ?' * len(gpu_fields.FIELDS)})"
)


def _finite(value: Any) -> Any:
    """NaN/inf are not JSON; the contract says "not available" is None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _num(value: Any) -> float | int | None:
    """A number for an index column, or NULL (bools and strings are not telemetry)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):  # beyond SQLite's INTEGER an insert fails and the recording would stop
        return value if -(2**63) <= value < 2**63 else None
    return value if math.isfinite(value) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_ENCODER = msgspec.json.Encoder()


def to_json(data: Any) -> str:
    """A row's JSON text, by msgspec as the events encode (NaN and inf written null: "not
    available"); an int past 64 bits, which msgspec does not write, by Python's json."""
    try:
        return _ENCODER.encode(data).decode()
    except OverflowError:
        return json.dumps(_finite(data), allow_nan=False, separators=(",", ":"))


class Recorder:
    """``bus.subscribe(Recorder(path))``; ``close()`` when the session ends. A writer that fails
    (disk full) stops recording and says so once, as a fatal Error from "record", to ``report``."""

    def __init__(self, path: Path, *, secrets: Iterable[str] = (), report: Callable[[Event], None] | None = None) -> None:
        self.path = Path(path)
        self._report = report
        self._redactor = Redactor(secrets)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=MAX_QUEUED)
        self._dropped = 0
        self._closed = False
        self._close_lock = threading.Lock()
        self.error: str | None = None  # the writer's failure, if any (disk full, ...)
        self._gpu_ids: dict[str, int] = {}  # uuid -> gpus.id (writer thread only)
        self._conn = self._create()
        self._thread = threading.Thread(target=self._write_loop, name="Recorder", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    @classmethod
    def for_session(
        cls, out_dir: Path, *, gpu_model: str, gpu_count: int, profile_name: str,
        when: datetime | None = None, secrets: Iterable[str] = (),
    ) -> Recorder:
        """A recorder on a fresh, well-named file under ``out_dir`` (recordings/)."""
        when = when or datetime.now(UTC)
        path = recording_path(out_dir, gpu_model=gpu_model, gpu_count=gpu_count, profile_name=profile_name, when=when)
        return cls(path, secrets=secrets)

    # ------------------------------------------------------------------ publisher side

    def __call__(self, event: Event) -> None:
        if self._closed or event.kind in NOT_RECORDED_KINDS:
            return
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._dropped += 1

    def close(self) -> None:
        """Write what is queued, commit, checkpoint, close. Idempotent, thread-safe."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)
        if not self._thread.is_alive():  # the writer failed: nothing drains the queue
            return
        try:
            self._queue.put(_STOP, timeout=CLOSE_TIMEOUT_S)
        except queue.Full:
            return
        self._thread.join(CLOSE_TIMEOUT_S)

    def discard(self) -> bool:
        """Remove the closed recording, its -wal and -shm, and the server logs beside it: a run
        that measured nothing and ended on bad input (the one line on stderr says why; a "failed"
        file would only be clutter). Kept when the writer failed (it says why). True when gone."""
        if self.error is not None:
            return False
        for leftover in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
            try:
                leftover.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                return False
        shutil.rmtree(self.path.parent / f"{self.path.stem}.logs", ignore_errors=True)
        return True

    # ------------------------------------------------------------------ writer side

    def _create(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_EXCL claims the name atomically: an existing recording is never written over.
            os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            raise UserError(f"{self.path}: already exists; a recording is never written over") from None
        except OSError as exc:
            raise UserError(f"{self.path}: cannot create the recording: {exc.strerror or exc}") from None
        try:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable against process death
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={RECORDING_SCHEMA}")
            conn.execute("BEGIN")
            for statement in filter(str.strip, DDL.split(";")):
                conn.execute(statement)
            meta = {
                "recording_schema": RECORDING_SCHEMA,
                "event_schema": SCHEMA_VERSION,
                "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
                "file_name": self.path.name,
            }
            conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [(k, to_json(v)) for k, v in meta.items()])
            conn.execute("COMMIT")
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")  # the schema in the main file from the start
            return conn
        except sqlite3.Error as exc:
            try:
                if self.path.stat().st_size == 0:  # only the name was claimed: give it back
                    self.path.unlink()
            except OSError:
                pass
            raise UserError(f"{self.path}: cannot create the recording: {exc}") from None

    def _write_loop(self) -> None:
        conn = self._conn
        pending = False
        last_commit = last_checkpoint = time.monotonic()
        milestone = False  # a level (or the session) ended since the last checkpoint
        stop = False
        try:
            while not stop:
                try:
                    item = self._queue.get(timeout=COMMIT_INTERVAL_S / 2)
                except queue.Empty:
                    item = None
                batch = [] if item is None else [item]
                while len(batch) < 5000:  # drain what is there, in bounded bites
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                for obj in batch:
                    if obj is _STOP:
                        stop = True
                        continue
                    if not pending:
                        conn.execute("BEGIN")
                        pending = True
                    self._write_event(conn, obj)
                    milestone = milestone or obj.kind in CHECKPOINT_KINDS
                if self._dropped and pending:
                    self._note_dropped(conn)
                if pending and (stop or time.monotonic() - last_commit >= COMMIT_INTERVAL_S or item is None):
                    conn.execute("COMMIT")
                    pending = False
                    last_commit = time.monotonic()
                if not pending and (milestone or last_commit - last_checkpoint >= CHECKPOINT_INTERVAL_S):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                    milestone = False
                    last_checkpoint = time.monotonic()
        except Exception as exc:  # disk full, file removed: keep the app alive, say why
            self.error = f"{type(exc).__name__}: {exc}"
            self._closed = True
            try:
                if conn.in_transaction:
                    conn.execute("COMMIT")
            except sqlite3.Error:
                pass
        finally:
            self._finish(conn)
        if self.error is not None and self._report is not None:
            self._report(Error(source="record", fatal=True, message=(
                f"recording stopped: {self.error} (disk full?); what was written stays readable: {self.path}")))

    def _write_event(self, conn: sqlite3.Connection, event: Event) -> None:
        try:
            data = self._redactor.value(event.to_dict())
            ts = event.ts if isinstance(event.ts, (int, float)) and math.isfinite(event.ts) else time.time()
            data["ts"] = ts
            text = to_json(data)
        except (TypeError, ValueError) as exc:  # one malformed event must not end the recording
            self._write_warning(conn, f"a {getattr(event, 'kind', type(event).__name__)} event could not be "
                                      f"recorded: {exc}", "record.malformed")
            return
        seq = conn.execute("INSERT INTO events (ts, kind, data) VALUES (?, ?, ?)", (float(ts), event.kind, text)).lastrowid
        if event.kind == "gpu_sample":
            conn.executemany(
                _INSERT_GPU_SAMPLE,
                [(seq, ts, self._gpu_id(conn, g), *(_num(f.value(g)) for f in gpu_fields.FIELDS))
                 for g in data.get("gpus") or [] if isinstance(g, dict)],
            )
        elif event.kind == "host_sample":
            conn.execute("INSERT INTO host_samples (seq, ts, cpu) VALUES (?, ?, ?)", (seq, ts, _num(data.get("cpu_percent"))))
        meta = self._metadata_of(event, data)
        if meta:
            conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [(k, to_json(v)) for k, v in meta.items()],
            )

    def _gpu_id(self, conn: sqlite3.Connection, reading: dict[str, Any]) -> int:
        uuid = str(reading.get("uuid"))
        gpu = self._gpu_ids.get(uuid)
        if gpu is None:
            row_id = conn.execute(
                "INSERT INTO gpus (uuid, idx, name, source) VALUES (?, ?, ?, ?)",
                (uuid, _num(reading.get("index")), _text(reading.get("name")), _text(reading.get("source"))),
            ).lastrowid
            assert row_id is not None  # an INSERT always sets it
            gpu = self._gpu_ids[uuid] = row_id
        return gpu

    @staticmethod
    def _metadata_of(event: Event, data: dict[str, Any]) -> dict[str, Any]:
        """The facts a reader wants without scanning events: kept as meta rows as well."""
        if isinstance(event, SessionStarted):
            profile = dict(data.get("profile") or {})
            if isinstance(profile.get("server"), dict):
                profile["server"] = redact_server(profile["server"])
            return {
                "session_id": data["session_id"],
                "profile_name": data["profile_name"],
                "profile": profile,
                "mode": data["mode"],
                "host": data.get("host", {}),
                "versions": data.get("versions", {}),
                "tool_version": data.get("tool_version", ""),
                "started_ts": data["ts"],
                **({"merged_from": data["merged_from"]} if data.get("merged_from") else {}),
            }
        if isinstance(event, ServerReady):
            return {
                "server": {
                    k: data.get(k)
                    for k in ("http_url", "metrics_url", "embedded", "model", "model_version",
                              "config_variant", "triton_version", "inputs", "mps", "mps_why", "endpoints")
                },
                "model_config": data.get("model_config", {}),
            }
        if isinstance(event, InputDataUsed):
            return {"input_data": {k: data.get(k) for k in ("path", "sha256", "entries", "requests", "source", "validated")}}
        if isinstance(event, SessionEnded):
            return {"ended_ts": data["ts"], "status": data["status"], "exit_code": data.get("exit_code", 0)}
        return {}

    def _note_dropped(self, conn: sqlite3.Connection) -> None:
        dropped, self._dropped = self._dropped, 0
        self._write_warning(conn, f"recorder queue full: {dropped} events were not recorded", "record.dropped")

    def _write_warning(self, conn: sqlite3.Connection, message: str, key: str) -> None:
        warning = {"kind": "warning", "v": SCHEMA_VERSION, "ts": time.time(), "source": "record",
                   "message": self._redactor.text(message), "key": key}
        conn.execute("INSERT INTO events (ts, kind, data) VALUES (?, ?, ?)", (warning["ts"], "warning", to_json(warning)))

    def _finish(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            # One self-contained file for copying; a live replay reader may hold the WAL open,
            # in which case the mode stays WAL (still complete, just with its -wal beside it).
            conn.execute("PRAGMA journal_mode=DELETE")
        except sqlite3.Error:
            pass
        finally:
            conn.close()
