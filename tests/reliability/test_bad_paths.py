"""Paths that are not what a command needs: a name too long, a FIFO given as a recording, a copy
without its -wal file, a full disk, --out onto an existing file or a folder, a folder given as a
profile. Each is one line on stderr and exit code 2, never a traceback nor a hang, and nothing is
left half-written.

A path refused as it is read runs `tui.cli.main` in this process (tests/cli_runner.py); one case of
each test, and the FIFOs (a hang is bounded by the subprocess's timeout), run the real
`python -m tui.cli`."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from engine.record.reader import Recording, RecordingError
from tests.cli_runner import run_cli, run_cli_inproc
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.reliability.test_bad_input import assert_one_line_exit_2


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = SyntheticRun(levels=[1, 4], windows_per_level=2, gpu_count=1, variant="1x")
    return record_events(tmp_path_factory.mktemp("r2") / "run.sqlite", synthetic_session(run))


LONG_NAME = "x" * 300


@pytest.mark.slow
@pytest.mark.parametrize("command", ["profile", "replay", "export", "compare", "export-out", "compare-out"])
def test_a_file_name_too_long_is_one_line(command, tmp_path, recording):
    long_path = str(tmp_path / f"{LONG_NAME}.sqlite")
    args = {
        "profile": ["--record", "--profile", str(tmp_path / f"{LONG_NAME}.toml"), "--output", str(tmp_path)],
        "replay": ["replay", "--headless", long_path],
        "export": ["export", long_path, "-f", "json"],
        "compare": ["compare", long_path, str(recording)],
        "export-out": ["export", str(recording), "-f", "json", "--out", str(tmp_path / LONG_NAME / "out")],
        "compare-out": ["compare", str(recording), str(recording), "--out", str(tmp_path / f"{LONG_NAME}.md")],
    }[command]
    cli = run_cli if command == "profile" else run_cli_inproc  # one through the real entry point
    assert_one_line_exit_2(cli(*args), LONG_NAME[:20])


@pytest.mark.slow
@pytest.mark.parametrize("command", [["replay", "--headless"], ["replay"], ["export", "-f", "json"], ["compare"]])
def test_a_fifo_given_as_a_recording_is_one_line_and_no_hang(command, tmp_path):
    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    assert_one_line_exit_2(run_cli(*command, str(fifo), timeout=30), "not a regular file")


def test_a_missing_wal_is_named(tmp_path):
    """A crashed writer's main file holds nothing yet (all in its -wal) and was copied alone."""
    live = tmp_path / "live.sqlite"
    conn = sqlite3.connect(live)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, ts REAL, kind TEXT, data TEXT)")
    conn.commit()
    copy = tmp_path / "copy.sqlite"
    shutil.copy(live, copy)  # without copy.sqlite-wal
    conn.close()
    with pytest.raises(RecordingError, match="the -wal file next to it .* is missing"):
        Recording.open(copy)


@pytest.fixture()
def tiny_disk(tmp_path: Path):
    """A real 64 KiB file system (tmpfs): writes past it fail with ENOSPC, as on a full disk."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_export_and_compare_onto_a_full_disk_are_one_line(tiny_disk, tmp_path):
    run = SyntheticRun(levels=[1, 2, 4, 8, 16, 32, 64], windows_per_level=3, gpu_count=4, variant="4x")
    big = record_events(tmp_path / "big.sqlite", synthetic_session(run))
    proc = run_cli("export", str(big), "-f", "json", "--out", str(tiny_disk))
    assert_one_line_exit_2(proc, "No space left on device")
    stat = os.statvfs(tiny_disk)  # leave room for the file's name, not for the report
    (tiny_disk / "filler").write_bytes(b"\0" * max(0, stat.f_bavail * stat.f_frsize - 2048))
    proc = run_cli_inproc("compare", str(big), str(big), "-f", "html", "--out", str(tiny_disk / "cmp.html"))
    assert_one_line_exit_2(proc, "No space left on device")
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler"], "half-written files left"


def test_compare_out_onto_an_existing_file_is_refused(tmp_path):
    run = SyntheticRun(levels=[1, 4], windows_per_level=2, gpu_count=1, variant="1x", probe=False)
    rec = record_events(tmp_path / "r.sqlite", synthetic_session(run))
    existing = tmp_path / "passwd"
    existing.write_text("root:x:0:0\n")
    proc = run_cli("compare", str(rec), str(rec), "--out", str(existing))
    assert_one_line_exit_2(proc, "already exists")
    assert existing.read_text() == "root:x:0:0\n" and not (tmp_path / "passwd.txt").exists()
    folder = tmp_path / "reports"
    folder.mkdir()
    assert_one_line_exit_2(run_cli_inproc("compare", str(rec), str(rec), "--out", str(folder)), "a folder")


def test_a_folder_given_as_a_profile_is_called_a_folder(tmp_path):
    assert_one_line_exit_2(run_cli("profiles", "--check", str(tmp_path)), "is a folder, not a profile file")
