"""Credentials are sent but never shown: a URL's user info goes to the server as HTTP Basic auth
(inference and /metrics alike), and neither it, a query token nor a header value given in the
profile reaches a validation error, an unreachable-server line, an unknown-model line or the
TUI's screens."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from engine.record.reader import Recording
from tests.cli_runner import run_cli, run_cli_inproc
from tests.reliability.test_bad_input import assert_one_line_exit_2

PASSWORD, TOKEN, KEY = "s3cretpw42", "t0kenvalue42", "k3yvalue42"
BASIC = base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
SECRETS = (PASSWORD, TOKEN, KEY, BASIC)


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} shown: {text[-1500:]}"


@pytest.mark.slow
def test_header_values_with_cr_lf_are_refused_and_not_echoed(tmp_path):
    profile = tmp_path / "inject.toml"
    profile.write_text(f'[server]\nkind = "remote"\nurl = "http://127.0.0.1:9"\n'
                       f'headers = {{ X-Api-Key = "{KEY}\\r\\nX-Evil: 1" }}\n')
    proc = run_cli("--record", "--profile", str(profile), "--output", str(tmp_path))
    assert_one_line_exit_2(proc, "server.headers: expected header values without control characters")
    assert_clean(proc.stdout + proc.stderr)


@pytest.mark.slow
def test_url_credentials_in_a_validation_error_are_masked(tmp_path):
    # refused while parsing: in this process (tests/cli_runner.py); the header case above is the real entry point
    proc = run_cli_inproc("--record", "--output", str(tmp_path), "--set", "server.kind=remote",
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
