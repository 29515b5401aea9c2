"""The bad-input corpus: every case is one line on stderr, exit code 2, no traceback, and nothing
already recorded is touched.

A case refused while its input is parsed runs `tui.cli.main` in this process (tests/cli_runner.py:
an exception escaping it fails the test, as a traceback would); one case of each test, and every
case that gets as far as a session (an embedded server, a connection), runs the real
`python -m tui.cli` in a subprocess."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
from pathlib import Path

import pytest

from engine.events import PhaseChanged, SessionStarted
from engine.record.recorder import Recorder
from tests.cli_runner import run_cli, run_cli_inproc

CORPUS = Path(__file__).parent / "corpus"

PROFILE_CASES = {
    "malformed.toml": "not valid TOML",
    "unknown_key.toml": "load.concurrencies: unknown key",
    "unknown_section.toml": "loader: unknown key",
    "remote_without_url.toml": "server.url: expected an http:// URL when server.kind = 'remote'",
    "rate_without_rates.toml": "load.rates: expected a non-empty list",
    "variant_beyond_gpus.toml": "model.variant: expected at most hardware.gpu_count (2)",
    "wrong_type.toml": "hardware.gpu_count: expected an integer >= 0, found 'four'",
    "bad_scheme_url.toml": "server.url: expected an http:// or https:// URL",
    "url_without_host.toml": "server.url: expected an http:// or https:// URL with a host",
    "unknown_model.toml": "unknown embedded model 'resnet_ghost'",
    "negative_rate.toml": "load.rates: expected a list of request rates > 0",
    "zero_concurrency.toml": "load.concurrency: expected a non-empty list of integers from 1 to 4096",
    "million_in_flight.toml": "found [1000000]",
    "stable_beyond_max.toml": "load.stable_windows: expected at most load.max_windows (2)",
    "not_utf8.toml": "cannot read",
    "wrong_input_shape.toml": "load.input_shapes.INPUT0: expected a shape matching [16] (-1 = any), found [32]",
    "unknown_input.toml": "load.input_shapes.INPUT9: expected one of the model's inputs (INPUT0)",
    "negative_dimension.toml": "load.input_shapes: expected a table of input name = list of positive dimensions",
}


# Refused only once a session has started the embedded server and read the model's inputs; and
# one refused by the profile's own checks, the real entry point end to end.
PROFILES_IN_A_SUBPROCESS = {"unknown_input.toml", "unknown_model.toml", "wrong_input_shape.toml", "malformed.toml"}


def assert_one_line_exit_2(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gpuscale-tui") and ": error: " in lines[0], lines[0]
    assert needle in lines[0], lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.fixture()
def existing_recording(tmp_path: Path) -> tuple[Path, str]:
    """An earlier session's recording in the output folder: must stay byte for byte."""
    path = tmp_path / "cpu_0gpu_local_20260101T000000Z.sqlite"
    recorder = Recorder(path)
    recorder(SessionStarted(session_id="old", profile_name="local", profile={}, mode="sweep", ts=1.0))
    recorder(PhaseChanged(phase="sweep", ts=2.0))
    recorder.close()
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _unchanged(recording: tuple[Path, str]) -> None:
    path, digest = recording
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


@pytest.mark.server
@pytest.mark.parametrize("name", sorted(PROFILE_CASES))
def test_bad_profiles(name, tmp_path, existing_recording):
    cli = run_cli if name in PROFILES_IN_A_SUBPROCESS else run_cli_inproc
    proc = cli("--record", "--profile", str(CORPUS / name), "--output", str(tmp_path))
    assert_one_line_exit_2(proc, PROFILE_CASES[name])
    _unchanged(existing_recording)


def test_every_corpus_file_has_a_case():
    assert {p.name for p in CORPUS.glob("*.toml")} == set(PROFILE_CASES)


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--set", "load.concurrency=0"], "load.concurrency: expected"),
        (["--set", "load.concurrency=-4"], "load.concurrency: expected"),
        (["--set", "load.concurrency=1000000"], "found [1000000]"),
        (["--set", "load.mode=rate", "--set", "load.rates=-5"], "load.rates: expected"),
        (["--set", "load.window_ms=0"], "load.window_ms: expected a positive integer"),
        (["--set", "load.batch_size=1e9"], "load.batch_size: expected a positive integer"),
        (["--set", "server.kind=remote", "--set", "server.url=localhost:8000"], "server.url: expected"),
        (["--set", "nonsense"], "expected section.key=value"),
        (["--set", "hardware.cost_per_hour=1e308"], "hardware.cost_per_hour: expected a price from $0.0001 to"),
        (["--profile", "no_such_profile"], "unknown profile 'no_such_profile'"),
        (["--profile", "/no/such/file.toml"], "no such profile file"),
    ],
)
@pytest.mark.slow
def test_absurd_flags(flags, needle, tmp_path, existing_recording):
    cli = run_cli if flags == ["--set", "nonsense"] else run_cli_inproc  # one through the real entry point
    proc = cli("--record", "--output", str(tmp_path), *flags)
    assert_one_line_exit_2(proc, needle)
    _unchanged(existing_recording)


@pytest.mark.slow
def test_unreachable_url_is_bad_input(tmp_path):
    """Refused once the session tries the server: a subprocess."""
    proc = run_cli("--record", "--output", str(tmp_path), "--set", "server.kind=remote",
                   "--set", "server.url=http://127.0.0.1:9")
    assert proc.returncode == 2, proc.stderr
    assert "cannot reach Triton at http://127.0.0.1:9" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


# --------------------------------------------------------------------------- recording files


def _recording_cases(tmp_path: Path, good: Path) -> dict[str, tuple[Path, str]]:
    data = good.read_bytes()
    truncated = tmp_path / "truncated.sqlite"
    truncated.write_bytes(data[: len(data) // 3])
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(data[:100] + b"\x00garbage" * 64 + data[100 + 512:])
    text = tmp_path / "notes.sqlite"
    text.write_text("these are my notes, not a recording\n")
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE songs (title TEXT)")
    newer = tmp_path / "newer.sqlite"
    newer.write_bytes(data)
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version=999")
    return {
        "truncated": (truncated, "truncated.sqlite"),
        "corrupt": (corrupt, "corrupt.sqlite"),
        "text": (text, "not a gpuscale-tui recording"),
        "empty": (empty, "empty.sqlite"),
        "foreign": (foreign, "not a gpuscale-tui recording"),
        "newer": (newer, "newer"),
        "missing": (tmp_path / "missing.sqlite", "missing.sqlite"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("case", ["truncated", "corrupt", "text", "empty", "foreign", "newer", "missing"])
@pytest.mark.parametrize("command", [["replay", "--headless"], ["export", "-f", "json"], ["compare"]])
def test_bad_recording_files(case, command, tmp_path, existing_recording):
    path, needle = _recording_cases(tmp_path, existing_recording[0])[case]
    args = [*command, str(path)]
    if command[0] == "export":
        args += ["--out", str(tmp_path / "out")]
    if command[0] == "compare":
        args.append(str(existing_recording[0]))
    cli = run_cli if case == "truncated" else run_cli_inproc  # each command once through the real entry point
    proc = cli(*args)
    assert_one_line_exit_2(proc, needle)
    _unchanged(existing_recording)


@pytest.mark.slow
def test_export_format_and_speed_flags(tmp_path, existing_recording):
    assert_one_line_exit_2(run_cli("export", str(existing_recording[0]), "-f", "pdf"), "invalid choice: 'pdf'")
    assert_one_line_exit_2(run_cli_inproc("replay", str(existing_recording[0]), "--speed", "-2"),
                           "expected a number > 0")
    assert_one_line_exit_2(run_cli_inproc("compare", "x.sqlite", "--max-p99", "32=fast"), "expected LEVEL=MILLISECONDS")
