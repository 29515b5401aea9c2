import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.events import (
    Error,
    HostSample,
    ReplayReset,
    ServerReady,
    SessionEnded,
    SessionStarted,
    Warning,
)
from engine.profiles import Profile, Server
from engine.record.reader import Recording
from engine.record.recorder import Recorder
from engine.record.schema import APPLICATION_ID, RECORDING_SCHEMA
from tests.engine.record.synthetic_recordings import synthetic_session

REPO = Path(__file__).resolve().parents[3]


def test_round_trip_and_metadata(tmp_path: Path) -> None:
    events = synthetic_session()
    path = tmp_path / "r.sqlite"
    rec = Recorder(path)
    for e in events:
        rec(e)
    rec(ReplayReset(position_s=1.0))  # a control signal, never data
    rec.close()
    rec.close()  # idempotent
    with Recording.open(path) as recording:
        assert list(recording.events()) == events
        meta = recording.metadata
    started = next(e for e in events if isinstance(e, SessionStarted))
    ready = next(e for e in events if isinstance(e, ServerReady))
    assert meta["profile_name"] == started.profile_name
    assert meta["versions"] == started.versions and meta["host"] == started.host
    assert meta["model_config"] == ready.model_config
    assert meta["server"]["config_variant"] == ready.config_variant
    assert meta["status"] == "ok" and meta["recording_schema"] == RECORDING_SCHEMA


def test_file_identity_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    rec = Recorder(path)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # while recording
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA user_version").fetchone()[0] == RECORDING_SCHEMA
    finally:
        conn.close()
    rec.close()
    assert not Path(f"{path}-wal").exists()  # checkpointed: one self-contained file after close


def test_never_written_over(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    path.write_bytes(b"someone's recording")
    with pytest.raises(UserError, match="already exists"):
        Recorder(path)
    assert path.read_bytes() == b"someone's recording"


def test_commits_without_close(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    rec = Recorder(path)
    try:
        rec(Warning(source="test", message="first"))
        deadline = time.monotonic() + 120  # a bound on a hang: the loop ends once it is seen
        seen = 0
        while time.monotonic() < deadline and not seen:
            with Recording.open(path) as r:
                seen = r.event_counts().get("warning", 0)
            time.sleep(0.05)
        assert seen == 1
    finally:
        rec.close()


def test_publisher_never_waits_on_the_disk(tmp_path: Path) -> None:
    """With the file locked by another connection, 1000 events are still accepted at once."""
    path = tmp_path / "r.sqlite"
    rec = Recorder(path)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    done = threading.Event()

    def publish() -> None:
        for i in range(1000):
            rec(Warning(source="test", message=str(i)))
        done.set()

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    finished_while_locked = done.wait(20)
    blocker.execute("COMMIT")
    blocker.close()
    rec.close()
    assert finished_while_locked
    with Recording.open(path) as r:
        assert [e.message for e in r.events(("warning",))] == [str(i) for i in range(1000)]


def test_credentials_are_never_written(tmp_path: Path) -> None:
    profile = Profile(name="remote", server=Server(kind="remote", url="http://alice:hunter2pw@triton.example:8000",
                                                   headers={"Authorization": "Bearer SECRETTOKEN123"}))
    path = tmp_path / "r.sqlite"
    rec = Recorder(path, secrets=profile.server.headers.values())
    # a producer that forgot to redact: the recorder must still keep the secrets out
    rec(SessionStarted(session_id="s", profile_name="remote", profile=profile.to_dict(redact=False), mode="sweep"))
    rec(ServerReady(http_url="http://alice:hunter2pw@triton.example:8000", metrics_url=None, embedded=False,
                    model="m", model_config={"headers": {"X-Api-Key": "k3y-value-9"}}))
    rec(Error(source="load", message="Cannot connect to host https://alice:hunter2pw@triton.example:8000/v2"))
    rec(Warning(source="load", message="server said: Authorization: Bearer SECRETTOKEN123 rejected"))
    rec(Warning(source="load", message="echo SECRETTOKEN123 again"))
    rec.close()
    raw = path.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.iterdir() if p != path)
    for secret in (b"hunter2pw", b"SECRETTOKEN123", b"k3y-value-9", b"alice:"):
        assert secret not in raw
    with Recording.open(path) as r:
        assert r.metadata["profile"]["server"]["headers"] == {"Authorization": "***"}  # names kept, values gone
        assert r.metadata["server"]["http_url"] == "http://***@triton.example:8000"


def test_recording_is_data_only() -> None:
    """No pickle, no eval: a recording can be opened from anyone without running their code."""
    sources = "\n".join(p.read_text() for p in (REPO / "engine" / "record").glob("*.py"))
    for word in ("import pickle", "pickle.", "eval(", "exec(", "marshal", "shelve"):
        assert word not in sources


def test_nan_becomes_not_available(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    rec = Recorder(path)
    rec(HostSample(cpu_percent=float("nan"), per_core=[1.0, float("inf")]))
    rec(SessionEnded(status="ok", ts=float("nan")))  # a broken clock must not end the recording
    rec(Warning(source="t", message="after"))
    rec.close()
    with Recording.open(path) as r:
        host, ended, warning = list(r.events())
    assert host.cpu_percent is None and host.per_core == [1.0, None]
    assert ended.status == "ok" and ended.ts > 0 and warning.message == "after"


def test_a_malformed_event_is_skipped_and_said(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    rec = Recorder(path)
    rec(Warning(source="t", message="before"))
    rec(Warning(source="t", message=object()))  # type: ignore[arg-type]  # not JSON
    rec(Warning(source="t", message="after"))
    rec.close()
    with Recording.open(path) as r:
        messages = [e.message for e in r.events()]
    assert messages[0] == "before" and messages[-1] == "after"
    assert "could not be recorded" in messages[1]


CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
from engine.events import Warning
from engine.record.recorder import Recorder
rec = Recorder(sys.argv[1])
i = 0
while True:
    rec(Warning(source="crash", message=str(i)))
    print(i, time.time(), flush=True)
    i += 1
    time.sleep(0.01)
"""


@pytest.mark.slow
def test_kill_9_keeps_everything_up_to_the_last_second(tmp_path: Path) -> None:
    path = tmp_path / "crash.sqlite"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(REPO)], stdout=subprocess.PIPE, text=True)
    published: dict[int, float] = {}
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = child.stdout.readline()  # type: ignore[union-attr]  # stdout=PIPE
            if not line:
                break
            i, ts = line.split()
            published[int(i)] = float(ts)
            if len(published) >= 250:
                break
        killed_at = time.time()
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(10)
        child.stdout.close()  # type: ignore[union-attr]  # stdout=PIPE
    assert len(published) >= 250
    with Recording.open(path) as r:  # opens as is: no repair step
        got = [int(e.message) for e in r.events(("warning",))]
    assert got == list(range(len(got)))  # a prefix, in order, nothing torn
    must_have = [i for i, ts in published.items() if ts <= killed_at - 1.0]
    assert must_have and max(must_have) < len(got)


def test_rows_are_json_text(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    rec = Recorder(path)
    rec(Warning(source="t", message="m"))
    rec.close()
    conn = sqlite3.connect(path)
    try:
        (kind, data), = conn.execute("SELECT kind, typeof(data) FROM events")
        (text,), = conn.execute("SELECT data FROM events")
    finally:
        conn.close()
    assert kind == "warning" and data == "text" and json.loads(text)["message"] == "m"


def test_a_failing_writer_says_why_and_never_hangs(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    reported: list = []
    rec = Recorder(path, report=reported.append)
    rec(Warning(source="t", message="kept"))
    deadline = time.monotonic() + 120  # a bound on a hang: the loop ends once it is seen
    while time.monotonic() < deadline and not _count(path):
        time.sleep(0.05)
    vandal = sqlite3.connect(path, isolation_level=None, timeout=10)
    vandal.execute("DROP TABLE host_samples")  # what a full disk or a removed file looks like to the writer
    vandal.close()
    rec(HostSample(cpu_percent=1.0))
    while time.monotonic() < deadline and rec.error is None:
        time.sleep(0.05)
    assert rec.error is not None and "host_samples" in rec.error
    rec._thread.join(10)  # the writer reports as it ends
    (error,) = reported  # said once, as the recorder's own fatal error, naming the file kept
    assert error.kind == "error" and error.source == "record" and error.fatal
    assert "host_samples" in error.message and str(path) in error.message
    for _ in range(10):
        rec(Warning(source="t", message="ignored"))  # still never blocks
    rec.close()
    rec.close()


def _count(path: Path) -> int:
    with Recording.open(path) as r:
        return sum(r.event_counts().values())
