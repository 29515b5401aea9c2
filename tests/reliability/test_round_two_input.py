"""Issue 18, bad input and secrets: every case is one line on stderr and exit code 2 (or the run's
own code), never a traceback, never a hang, and no credential on any human-facing line."""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from engine.record.reader import Recording, RecordingError
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.reliability.test_bad_input import assert_one_line_exit_2, run_cli

PASSWORD, TOKEN, KEY = "s3cretpw42", "t0kenvalue42", "k3yvalue42"
BASIC = base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
SECRETS = (PASSWORD, TOKEN, KEY, BASIC)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = SyntheticRun(levels=[1, 4], windows_per_level=2, gpu_count=1, variant="1x")
    return record_events(tmp_path_factory.mktemp("r2") / "run.sqlite", synthetic_session(run))


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} shown: {text[-1500:]}"


# --------------------------------------------------------------------------- long names, odd files


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
    assert_one_line_exit_2(run_cli(*args), LONG_NAME[:20])


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


# --------------------------------------------------------------------------- disk full


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
    proc = run_cli("compare", str(big), str(big), "-f", "html", "--out", str(tiny_disk / "cmp.html"))
    assert_one_line_exit_2(proc, "No space left on device")
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler"], "half-written files left"


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--set", "load.warmup_s=inf"], "load.warmup_s: expected a finite number"),
        (["--set", "load.request_timeout_s=inf"], "load.request_timeout_s: expected a finite number"),
        (["--set", "load.request_timeout_s=nan"], "load.request_timeout_s: expected a finite number"),
        (["--set", "load.window_ms=100000000000000000000000000"], "load.window_ms: expected a value up to"),
        (["--set", "server.kind=remote", "--set", "server.url=http://[::1"], "server.url: expected"),
        (["--set", "server.bind_address=not an address"], "server.bind_address: expected an IP address"),
    ],
)
@pytest.mark.slow
def test_inf_nan_huge_and_malformed_values_are_refused(flags, needle, tmp_path):
    proc = run_cli("--record", "--output", str(tmp_path), *flags)
    assert_one_line_exit_2(proc, needle)
    assert not list(tmp_path.glob("*.sqlite"))


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--min-throughput", "nan"], "expected a number > 0, found 'nan'"),
        (["--min-efficiency", "nan"], "expected a number > 0, found 'nan'"),
        (["--min-throughput", "inf"], "expected a number > 0, found 'inf'"),
        (["--max-p99", "2=nan"], "the limit must be a finite number"),
    ],
)
@pytest.mark.slow
def test_nan_gates_are_refused(flags, needle, recording):
    assert_one_line_exit_2(run_cli("compare", str(recording), *flags), needle)


@pytest.mark.slow
def test_server_bind_that_is_not_an_address_is_one_line():
    assert_one_line_exit_2(run_cli("server", "--bind", "not an address"), "--bind: expected an IP address")


@pytest.mark.slow
def test_header_values_with_cr_lf_are_refused_and_not_echoed(tmp_path):
    profile = tmp_path / "inject.toml"
    profile.write_text(f'[server]\nkind = "remote"\nurl = "http://127.0.0.1:9"\n'
                       f'headers = {{ X-Api-Key = "{KEY}\\r\\nX-Evil: 1" }}\n')
    proc = run_cli("--record", "--profile", str(profile), "--output", str(tmp_path))
    assert_one_line_exit_2(proc, "server.headers: expected header values without control characters")
    assert_clean(proc.stdout + proc.stderr)


# --------------------------------------------------------------------------- secrets and credentials


@pytest.mark.slow
def test_url_credentials_in_a_validation_error_are_masked(tmp_path):
    proc = run_cli("--record", "--output", str(tmp_path), "--set", "server.kind=remote",
                   "--set", f"server.url=ftp://bob:{PASSWORD}@box/?token={TOKEN}")
    assert_one_line_exit_2(proc, "server.url: expected")
    assert_clean(proc.stdout + proc.stderr)


@pytest.mark.slow
def test_unreachable_url_with_credentials_shows_none_and_leaves_no_recording(tmp_path):
    proc = run_cli("--record", "--output", str(tmp_path), "--set", "server.kind=remote",
                   "--set", f"server.url=http://bob:{PASSWORD}@127.0.0.1:9/?token={TOKEN}",
                   "--set", f"server.headers={{X-Api-Key=\"{KEY}\"}}")
    assert_one_line_exit_2(proc, "cannot reach Triton at http://127.0.0.1:9")
    assert_clean(proc.stdout + proc.stderr)
    assert not list(tmp_path.glob("*.sqlite")), "bad input after the start left a 'failed' recording"


class _FakeTriton(BaseHTTPRequestHandler):
    """Enough of Triton's HTTP API to get past the start: ready, metadata, config, metrics;
    every inference fails (HTTP 500). It writes down the Authorization header of each request."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str | None]] = []
    model = {"name": "m", "versions": ["1"], "platform": "python",
             "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}],
             "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 4]}]}

    def _reply(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        path = self.path.split("?")[0]
        if path == "/v2/health/ready":
            self._reply(200, b"")
        elif path == "/v2":
            self._reply(200, json.dumps({"name": "triton", "version": "fake"}).encode())
        elif path == "/v2/models/m":
            self._reply(200, json.dumps(self.model).encode())
        elif path == "/v2/models/m/config":
            self._reply(200, json.dumps({"name": "m", "max_batch_size": 8}).encode())
        elif path == "/metrics":
            self._reply(200, b"# no metrics\n", "text/plain")
        else:
            self._reply(404, json.dumps({"error": f"unknown model at {path}"}).encode())

    def do_POST(self) -> None:  # noqa: N802
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._reply(500, json.dumps({"error": "this fake server does not infer"}).encode())

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture()
def fake_triton():
    _FakeTriton.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeTriton)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _remote(tmp_path: Path, where: str, model: str) -> str:
    profile = tmp_path / "remote.toml"
    profile.write_text(
        f'[server]\nkind = "remote"\nurl = "http://bob:{PASSWORD}@{where}"\n'
        f'metrics_url = "http://bob:{PASSWORD}@{where}/metrics"\nheaders = {{ X-Api-Key = "{KEY}" }}\n'
        f'[model]\nname = "{model}"\n[load]\nconcurrency = [1]\nwindow_ms = 300\nwarmup_s = 0\nmax_windows = 2\n'
        f'stable_windows = 2\nworkers = 1\nrequest_timeout_s = 2\n[telemetry]\nhost_interval_s = 0.2\n'
        f'nvml_interval_s = 0.2\n')
    return str(profile)


@pytest.mark.slow
def test_model_not_available_line_shows_no_credentials(tmp_path, fake_triton):
    proc = run_cli("--record", "--output", str(tmp_path), "--profile", _remote(tmp_path, fake_triton, "ghost"))
    assert_one_line_exit_2(proc, f"model 'ghost' is not available at http://{fake_triton}")
    assert_clean(proc.stdout + proc.stderr)
    # the URL's credentials were sent, as HTTP Basic auth
    assert _FakeTriton.seen and all(auth == f"Basic {BASIC}" for _path, auth in _FakeTriton.seen)
    assert not list(tmp_path.glob("*.sqlite")) and not list(tmp_path.glob("*.logs")), "a 'failed' recording was left"


@pytest.mark.slow
def test_url_credentials_reach_inference_and_metrics_as_basic_auth(tmp_path, fake_triton):
    proc = run_cli("--record", "--output", str(tmp_path), "--profile", _remote(tmp_path, fake_triton, "m"))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text  # every inference failed: a failed run, never "ok"
    assert "Traceback" not in text
    assert_clean(text)
    (rec,) = tmp_path.glob("*.sqlite")
    with Recording.open(rec) as recording:
        assert recording.metadata["status"] == "failed"
    paths = {path.split("?")[0] for path, _auth in _FakeTriton.seen}
    assert {"/v2/health/ready", "/metrics"} <= paths and any(p.endswith("/infer") for p in paths), paths
    assert all(auth == f"Basic {BASIC}" for _path, auth in _FakeTriton.seen), set(_FakeTriton.seen)


@pytest.mark.slow
async def test_tui_screen_shows_no_credentials(tmp_path):
    """The TUI (Textual's pilot) renders the same events: its screens are as clean."""
    from engine.profiles import load_profile
    from engine.session import Session, SessionOptions
    from tui.app import GpuscaleApp

    profile = load_profile("local", ["server.kind=remote", f"server.url=http://bob:{PASSWORD}@127.0.0.1:9/?token={TOKEN}",
                                     f'server.headers={{X-Api-Key="{KEY}"}}'])
    session = Session(profile, SessionOptions(record_dir=None, interactive=True))
    app = GpuscaleApp(controls=session)
    app.attach(session)
    screens = []
    async with app.run_test(size=(160, 50)) as pilot:
        for _ in range(100):
            if not session.running:
                break
            await pilot.pause(0.1)
        await pilot.pause(0.5)
        for key in ("1", "4"):  # the live view and the warnings-and-log view
            await pilot.press(key)
            await pilot.pause(0.3)
            screens.append(app.export_screenshot())
    app.stop_sources()
    text = "\n".join(screens)
    assert "127.0.0.1:9" in text, "the error line is not on screen: nothing was checked"
    assert_clean(text)


# --------------------------------------------------------------------------- replay ends


@pytest.mark.slow
def test_headless_replay_ends_also_without_a_terminal(recording, tmp_path):
    crashed = tmp_path / "crashed.sqlite"
    shutil.copy(recording, crashed)
    with sqlite3.connect(crashed) as conn:  # a session that never ended
        conn.execute("DELETE FROM events WHERE kind = 'session_ended'")
        conn.execute("DELETE FROM meta WHERE key IN ('status', 'exit_code', 'ended_ts')")
    for args in (["replay", "--headless", str(recording)], ["replay", "--headless", str(crashed)],
                 ["replay", str(recording)]):  # plain replay, stdout a pipe: no terminal to draw on
        proc = run_cli(*args, timeout=60)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stdout + proc.stderr
        assert "level" in proc.stdout


@pytest.mark.slow
def test_replay_of_a_crashed_recording_keeps_the_recordings_clock(recording, tmp_path):
    """Replay's own notices (no end yet, gave up) carry the recording's time, not today's: the
    screen's elapsed time stays that of the recording (not the months since it was made)."""
    from engine.record.replay_source import ReplaySource
    from tui.state import SessionState

    crashed = tmp_path / "crashed.sqlite"
    shutil.copy(recording, crashed)
    with sqlite3.connect(crashed) as conn:
        conn.execute("DELETE FROM events WHERE kind = 'session_ended'")
        conn.execute("DELETE FROM meta WHERE key IN ('status', 'exit_code', 'ended_ts')")
    with Recording.open(crashed) as rec:
        duration = rec.summary().duration_s
    state = SessionState()
    source = ReplaySource(crashed, speed=None, linger=False, idle_timeout_s=0.6)
    source.bus.subscribe(state.apply)
    source.start()
    assert source.join(30)
    assert any("no end yet" in n.message for n in state.notices.values()), "the notice was not published"
    assert 0 < state.elapsed_s <= duration + 1e-6
