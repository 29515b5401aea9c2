import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.events import SCHEMA_VERSION, Warning
from engine.record.reader import Recording
from engine.record.recorder import Recorder
from engine.record.schema import APPLICATION_ID


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


def _one_line_error(path: Path) -> str:
    with pytest.raises(UserError) as info:
        Recording.open(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_missing_file_and_folder(tmp_path: Path) -> None:
    assert "no such recording" in _one_line_error(tmp_path / "nope.sqlite")
    assert "folder" in _one_line_error(tmp_path)


def test_text_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_text("hello, not a database\n" * 20)
    assert "not an SQLite file" in _one_line_error(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    assert "empty file" in _one_line_error(path)


def test_truncated_file(tmp_path: Path, recording_4x: Path) -> None:
    path = tmp_path / "cut.sqlite"
    data = recording_4x.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert "truncated" in _one_line_error(path)
    path.write_bytes(data[:60])
    assert "truncated" in _one_line_error(path)


def test_corrupt_pages(tmp_path: Path, recording_4x: Path) -> None:
    path = _copy(recording_4x, tmp_path / "bad.sqlite")
    data = bytearray(path.read_bytes())
    for page in range(1, len(data) // 4096):  # keep the header page, wreck every other one
        data[page * 4096: page * 4096 + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(UserError) as info:
        with Recording.open(path) as r:
            r.summary()
    assert "\n" not in str(info.value) and ("corrupt" in str(info.value) or "malformed" in str(info.value))


def test_foreign_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE events (x)")
    conn.commit()
    conn.close()
    assert "not a gpuscale-tui recording" in _one_line_error(path)


def test_newer_schema(tmp_path: Path, recording_4x: Path) -> None:
    path = _copy(recording_4x, tmp_path / "future.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    message = _one_line_error(path)
    assert "v99 is newer" in message and "upgrade" in message


def test_created_but_never_initialised(tmp_path: Path) -> None:
    path = tmp_path / "half.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    assert "incomplete" in _one_line_error(path)


def _with_extra_event(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "r.sqlite"
    rec = Recorder(path)
    rec(Warning(source="t", message="known"))
    rec.close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO events (ts, kind, data) VALUES (?, ?, ?)", (1.0, data["kind"], json.dumps(data)))
    conn.commit()
    conn.close()
    return path


def test_event_of_a_newer_version(tmp_path: Path) -> None:
    path = _with_extra_event(tmp_path, {"kind": "warning", "v": SCHEMA_VERSION + 1, "ts": 1.0, "source": "x",
                                        "message": "y"})
    with Recording.open(path) as r:
        with pytest.raises(UserError, match="newer"):
            list(r.events())


def test_unknown_kind_of_a_newer_minor_version_is_skipped(tmp_path: Path) -> None:
    path = _with_extra_event(tmp_path, {"kind": "gpu_fan_speed", "v": SCHEMA_VERSION, "ts": 1.0, "rpm": 900})
    with Recording.open(path) as r:
        assert [e.message for e in r.events()] == ["known"]
        assert r.unknown_events == 1


def test_open_never_modifies(tmp_path: Path, recording_4x: Path) -> None:
    path = _copy(recording_4x, tmp_path / "r.sqlite")
    before = path.read_bytes()
    with Recording.open(path) as r:
        r.summary()
        list(r.events())
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]


def test_summary_of_a_sweep(recording_4x: Path) -> None:
    with Recording.open(recording_4x) as r:
        s = r.summary()
    assert [lv.level for lv in s.levels] == [1, 4, 8, 16, 32, 64, 128]
    # the synthetic server: 4 GPUs x 150 images/s, base latency 20 ms -> min(c / 0.02, 600)
    assert [lv.result.throughput_ips for lv in s.levels] == [50, 200, 400, 600, 600, 600, 600]
    assert s.gpus_in_config == 4 and s.gpu_model == "RTX 4080" and s.cost_per_hour == 2.0
    assert len(s.gpus) == 4 and all(g.samples > 100 for g in s.gpus)
    # synthetic utilization is 95 % x load (+0..3 noise): 600/600 at c=16 -> 95..98 %
    assert all(95.0 <= u <= 98.0 for u in s.levels[3].gpu_util.values())
    assert all(lv.windows_recorded == 4 for lv in s.levels)
    assert s.status == "ok" and s.random_weights and len(s.probe) == 3 and len(s.allreduce) == 1
