"""The recording file format: SQLite in WAL mode, one JSON text row per event.

Why SQLite: a single file that any tool opens, transactions that survive ``kill -9`` of the
writer (a committed WAL frame is in the OS page cache the moment COMMIT returns), readers that
do not block the writer (a file can be replayed while it is being written), and indexed reads
so that opening and summarising an hour of 1 Hz telemetry stays well under a second.
Why JSON text rows: a recording is data only (no pickle, nothing executable), readable with the
``sqlite3`` shell, and it is exactly the events' own serialisation (``Event.to_dict``).

Identity: ``PRAGMA application_id`` marks the file as ours (a foreign SQLite database is
refused), ``PRAGMA user_version`` holds ``RECORDING_SCHEMA``. Bump it when a table or a meta key
changes meaning; readers refuse files of a newer schema.
"""

from __future__ import annotations

from engine.record.gpu_fields import table_ddl

APPLICATION_ID = 0x47505354  # "GPST": gpuscale-tui recording
RECORDING_SCHEMA = 1
SQLITE_MAGIC = b"SQLite format 3\x00"

# Events that are control signals for consumers, not data: never written.
NOT_RECORDED_KINDS = frozenset({"replay_reset"})

DDL = f"""
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL            -- JSON text
);
CREATE TABLE events (
    seq  INTEGER PRIMARY KEY,      -- publication order
    ts   REAL NOT NULL,            -- the event's own ts (UNIX seconds)
    kind TEXT NOT NULL,
    data TEXT NOT NULL             -- Event.to_dict() as JSON text
);
CREATE INDEX events_kind ON events (kind, seq);
-- Telemetry again, one row per GPU reading: an index for summaries (SQL aggregates instead of
-- parsing an hour of JSON). Written in the same transaction as its event row. gpu_samples' metric
-- columns come from engine/record/gpu_fields.py.
CREATE TABLE gpus (
    id     INTEGER PRIMARY KEY,
    uuid   TEXT NOT NULL UNIQUE,
    idx    INTEGER,
    name   TEXT,
    source TEXT
);
{table_ddl()};
CREATE INDEX gpu_samples_ts ON gpu_samples (ts);
CREATE TABLE host_samples (
    seq INTEGER NOT NULL,
    ts  REAL NOT NULL,
    cpu REAL                       -- percent of all cores
);
CREATE INDEX host_samples_ts ON host_samples (ts);
"""

REQUIRED_TABLES = frozenset({"meta", "events", "gpus", "gpu_samples", "host_samples"})
