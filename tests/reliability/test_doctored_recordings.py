"""Doctored recordings and study indexes at the command line: a wrong-typed timestamp, telemetry
row or GPU reading, or an index naming a variant that cannot be, is one line and exit 2 in
replay (headless too), export and compare; a replay that failed never prints "done" nor exits 0.

Export and compare refuse a doctored file as they read it, and replay a doctored study index,
before any work: `tui.cli.main` in this process (tests/cli_runner.py), one case of each test and
command through the real `python -m tui.cli`. A headless replay of a recording plays it on a
thread: always a subprocess."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.study.index import StudyIndex, VariantRun, write_index
from tests.cli_runner import run_cli, run_cli_inproc
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.reliability.test_bad_input import assert_one_line_exit_2


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = SyntheticRun(levels=[1, 4], windows_per_level=2, gpu_count=2, variant="2x")
    return record_events(tmp_path_factory.mktemp("r3") / "run.sqlite", synthetic_session(run))


def _doctored(recording: Path, tmp_path: Path, sql: str, params: tuple = ()) -> Path:
    path = tmp_path / "doctored.sqlite"
    shutil.copy(recording, path)
    with sqlite3.connect(path) as conn:
        conn.execute(sql, params)
    return path


def _gpu_reading_none(recording: Path, tmp_path: Path) -> Path:
    path = tmp_path / "doctored.sqlite"
    shutil.copy(recording, path)
    with sqlite3.connect(path) as conn:
        seq, text = conn.execute("SELECT seq, data FROM events WHERE kind = 'gpu_sample' LIMIT 1").fetchone()
        data = json.loads(text)
        data["gpus"][0] = None
        conn.execute("UPDATE events SET data = ? WHERE seq = ?", (json.dumps(data), seq))
    return path


CASES = {
    "timestamp-text": ("UPDATE events SET ts = 'yesterday' WHERE seq = (SELECT max(seq) FROM events WHERE kind = "
                       "'level_result')", "ts is 'yesterday', not a number"),
    "gpu-util-text": ("UPDATE gpu_samples SET util = '[]' WHERE rowid = 3", "util is '[]', not a number"),
    "host-cpu-text": ("UPDATE host_samples SET cpu = '{}'", "cpu is '{}', not a number"),
    "gpu-power-infinite": ("UPDATE gpu_samples SET power = 9e999 WHERE rowid = 2", "power is 'inf', not a number"),
}


# replay shows the events (their times); export and compare read the telemetry tables too
PAIRS = [("timestamp-text", "replay"), *((case, command) for case in sorted(CASES) for command in ("export", "compare"))]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "command"), PAIRS)
def test_doctored_tables_are_one_line_and_exit_2(case, command, recording, tmp_path):
    sql, needle = CASES[case]
    path = _doctored(recording, tmp_path, sql)
    args = {"replay": ["replay", "--headless", str(path)],
            "export": ["export", str(path), "-f", "md", "--out", str(tmp_path / "out")],
            "compare": ["compare", str(path), str(recording)]}[command]
    cli = run_cli if command == "replay" or case == "gpu-power-infinite" else run_cli_inproc
    proc = cli(*args)
    assert_one_line_exit_2(proc, needle)
    assert "done" not in proc.stdout.splitlines()


@pytest.mark.slow
def test_a_gpu_sample_with_a_missing_reading_fails_headless_replay(recording, tmp_path):
    proc = run_cli("replay", "--headless", str(_gpu_reading_none(recording, tmp_path)))
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr and "Exception in thread" not in proc.stderr
    assert "done" not in proc.stdout.splitlines()
    assert proc.stderr.strip().count("\n") == 0 and "gpus: expected a list of GpuReading tables" in proc.stderr, proc.stderr


def test_a_timestamp_gone_bad_mid_replay_is_a_failed_replay(recording, tmp_path):
    """The source's own thread meets the bad row (a file that grows): exit 2, never "done"."""
    from engine.record.replay_source import ReplaySource

    path = tmp_path / "growing.sqlite"
    shutil.copy(recording, path)
    with sqlite3.connect(path) as conn:
        last = conn.execute("SELECT max(seq) FROM events").fetchone()[0]
        conn.execute("DELETE FROM events WHERE seq > ?", (last - 3,))
    source = ReplaySource(path, speed=None, linger=False, idle_timeout_s=3.0)
    with sqlite3.connect(path) as conn:  # a row written after the replay began, with a text time
        conn.execute("INSERT INTO events (ts, kind, data) VALUES ('soon', 'phase', '{\"kind\": \"phase\"}')")
    source.start()
    assert source.join(30)
    assert source.exit_code == 2 and source.error is not None and "ts is 'soon'" in source.error


def _index(tmp_path: Path, recording: Path, runs: list[dict]) -> Path:
    shutil.copy(recording, tmp_path / "2x.sqlite")
    index = StudyIndex(study_id="s", profile="p", model="identity", variants=["2x"], server="embedded",
                       runs=[VariantRun("2x", "2x.sqlite", "ok", 0)], status="ok", started=1.0, ended=2.0)
    path = tmp_path / "s.study.json"
    write_index(index, path)
    data = json.loads(path.read_text())
    data["runs"] = runs
    path.write_text(json.dumps(data))
    return path


BAD_RUNS = {
    "unknown-variant": ([{"variant": "gpu9", "recording": "2x.sqlite", "status": "ok", "exit_code": 0}],
                        "unknown variant 'gpu9'"),
    "variant-number": ([{"variant": 2, "recording": "2x.sqlite", "status": "ok", "exit_code": 0}],
                       "unknown variant 2"),
    "recording-outside": ([{"variant": "2x", "recording": "../../etc/passwd", "status": "ok", "exit_code": 0}],
                          "is not a file name beside the index"),
    "exit-code-text": ([{"variant": "2x", "recording": "2x.sqlite", "status": "ok", "exit_code": "0"}],
                       "status and exit_code of the wrong type"),
}


@pytest.mark.parametrize("case", sorted(BAD_RUNS))
@pytest.mark.parametrize("command", ["export-md", "export-csv", "compare", "replay"])
def test_a_doctored_study_index_is_one_line_and_exit_2(case, command, recording, tmp_path):
    runs, needle = BAD_RUNS[case]
    index = _index(tmp_path, recording, runs)
    args = {"export-md": ["export", str(index), "-f", "md"], "export-csv": ["export", str(index), "-f", "csv"],
            "compare": ["compare", str(index)], "replay": ["replay", "--headless", str(index)]}[command]
    cli = run_cli if case == "exit-code-text" else run_cli_inproc
    assert_one_line_exit_2(cli(*args), needle)


def test_study_replay_of_a_variant_whose_recording_is_doctored_exits_2(recording, tmp_path):
    index = _index(tmp_path, recording, [{"variant": "2x", "recording": "2x.sqlite", "status": "ok", "exit_code": 0}])
    _gpu_reading_none(recording, tmp_path).replace(tmp_path / "2x.sqlite")
    proc = run_cli("replay", "--headless", str(index))
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "gpus: expected a list of GpuReading tables" in proc.stderr


def _event_doctored(recording: Path, tmp_path: Path, kind: str, change) -> Path:  # noqa: ANN001 - a dict -> None
    path = tmp_path / "doctored.sqlite"
    shutil.copy(recording, path)
    with sqlite3.connect(path) as conn:
        seq, text = conn.execute("SELECT seq, data FROM events WHERE kind = ? LIMIT 1", (kind,)).fetchone()
        data = json.loads(text)
        change(data)
        conn.execute("UPDATE events SET data = ? WHERE seq = ?", (json.dumps(data), seq))  # NaN as JSON's NaN
    return path


@pytest.mark.parametrize("command", ["export", "compare"])
def test_a_level_count_that_is_not_a_count_is_one_line(command, recording, tmp_path):
    path = _event_doctored(recording, tmp_path, "level_started", lambda d: d.update(total="interrupted"))
    args = ["export", str(path), "-f", "csv", "--out", str(tmp_path)] if command == "export" else [
        "compare", str(path), str(recording)]
    cli = run_cli if command == "compare" else run_cli_inproc  # compare through the real entry point
    assert_one_line_exit_2(cli(*args), "total must be a count of levels")


@pytest.mark.slow
def test_nan_in_a_recorded_number_is_not_available_or_one_line(recording, tmp_path):
    optional = _event_doctored(recording, tmp_path, "window", lambda d: d["audit"].update(first_byte_p50=float("nan")))
    proc = run_cli("export", str(optional), "-f", "csv", "--out", str(tmp_path / "a"))
    assert proc.returncode == 0, proc.stderr  # an optional figure: not available, as the recorder writes it
    required = _event_doctored(recording, tmp_path, "level_result", lambda d: d.update(throughput_ips=float("nan")))
    assert_one_line_exit_2(run_cli_inproc("export", str(required), "-f", "csv", "--out", str(tmp_path / "b")),
                           "throughput_ips: expected a number, found nan")


@pytest.mark.slow
def test_an_absurd_recorded_warmup_does_not_stop_the_headless_printer(recording, tmp_path):
    """A profile whose warmup is 1e308 s makes the sweep's time left infinite: shown as n/a."""
    path = tmp_path / "doctored.sqlite"
    shutil.copy(recording, path)
    with sqlite3.connect(path) as conn:
        seq, text = conn.execute("SELECT seq, data FROM events WHERE kind = 'session_started'").fetchone()
        data = json.loads(text)
        data["profile"]["load"]["warmup_s"] = 1e308
        conn.execute("UPDATE events SET data = ? WHERE seq = ?", (json.dumps(data), seq))
        conn.execute("UPDATE meta SET value = ? WHERE key = 'profile'", (json.dumps(data["profile"]),))
    proc = run_cli("replay", "--headless", str(path))
    assert proc.returncode == 0 and "printer failed" not in proc.stderr, proc.stderr
