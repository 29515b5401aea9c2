"""Secrets on every surface: user info whatever it holds ('/' or spaces), header values given with
--set, every query value, and a server that echoes the credentials we sent (as sent, decoded from
Basic auth, percent- or JSON-escaped) never reach stderr, stdout or the recording.

The flags refused while parsing run `tui.cli.main` in this process (tests/cli_runner.py), one case
of each test through the real `python -m tui.cli`."""

from __future__ import annotations

import base64
import json
import sqlite3
from urllib.parse import quote

import pytest

from engine.redact import Redactor
from tests.cli_runner import run_cli, run_cli_inproc
from tests.reliability.hostile_server import HostileTriton, Reply, Seen
from tests.reliability.test_bad_input import assert_one_line_exit_2

PASSWORD = "pa/ss w0rd42"  # a '/' and a space: user info that a simple pattern does not see
KEY = "hdrvalue42x"
QUERY = "qvalue42x"


def assert_clean(text: str, *secrets: str) -> None:
    for secret in (*secrets, PASSWORD, quote(PASSWORD, safe=""), KEY, QUERY, "w0rd42"):
        assert secret not in text, f"{secret!r} shown: {text[-1500:]}"


@pytest.mark.parametrize("key", ["server.url", "server.metrics_url"])
def test_user_info_with_a_slash_or_space_is_masked_in_the_validation_error(key, tmp_path):
    args = ["--set", "server.kind=remote"] + (["--set", "server.url=http://127.0.0.1:9"] if key != "server.url" else [])
    cli = run_cli if key == "server.url" else run_cli_inproc  # one through the real entry point
    proc = cli("--record", "--output", str(tmp_path), *args, "--set", f"{key}=ftp://bob:{PASSWORD}@box/")
    assert_one_line_exit_2(proc, f"{key}: expected")
    assert_clean(proc.stdout + proc.stderr)


def test_user_info_without_a_scheme_is_masked(tmp_path):
    proc = run_cli_inproc("--record", "--output", str(tmp_path), "--set", "server.kind=remote",
                          "--set", f"server.url=bob:{PASSWORD}@box")
    assert_one_line_exit_2(proc, "server.url: expected")
    assert_clean(proc.stdout + proc.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("value", [f'{{X-Custom="{KEY}"', f"{KEY}", f'{{X-Custom = ["{KEY}"]}}'])
def test_header_values_given_with_set_are_not_echoed(value, tmp_path):
    cli = run_cli if value == KEY else run_cli_inproc  # one through the real entry point
    proc = cli("--record", "--output", str(tmp_path), "--set", f"server.headers={value}")
    assert_one_line_exit_2(proc, "server.headers: expected")
    assert_clean(proc.stdout + proc.stderr)


@pytest.mark.parametrize("item", [f"server.headers.X-Custom:{KEY}", f"server.url.x={KEY}"])
def test_an_override_that_cannot_apply_is_not_echoed(item, tmp_path):
    cli = run_cli if item.startswith("server.url") else run_cli_inproc  # one through the real entry point
    proc = cli("--record", "--output", str(tmp_path), "--set", item)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert_clean(proc.stdout + proc.stderr)


def test_every_query_value_is_masked():
    text = Redactor().text(f"GET http://h:8002/metrics?key={QUERY}&sig={QUERY}&token={QUERY} failed")
    assert QUERY not in text and "http://h:8002/metrics?key=***&sig=***&token=***" in text


def _echo(seen: Seen) -> Reply:
    """A server that tells the client what credentials it got, every way it might."""
    auth = seen.headers.get("Authorization", "")
    decoded = base64.b64decode(auth.split()[-1]).decode() if auth.startswith("Basic ") else ""
    return Reply(401, {"error": f"rejected {auth} ({decoded}; pw={quote(decoded.partition(':')[2], safe='')}; "
                                f"json={json.dumps(decoded)}) key {seen.headers.get('X-Custom', '')}"})


@pytest.mark.slow
@pytest.mark.parametrize("where", ["infer", "metadata"])
def test_a_server_that_echoes_our_credentials_shows_none_of_them(where, tmp_path):
    srv = HostileTriton(**{where: _echo})
    with srv:
        profile = tmp_path / "p.toml"
        profile.write_text(
            f'[server]\nkind = "remote"\nurl = "http://bob:{quote(PASSWORD, safe="")}@{srv.where}"\n'
            f'metrics_url = "http://{srv.where}/metrics?key={QUERY}"\nheaders = {{ X-Custom = "{KEY}" }}\n'
            '[model]\nname = "m"\n[load]\nconcurrency = [1]\nwindow_ms = 300\nwarmup_s = 0\nmax_windows = 2\n'
            'stable_windows = 2\nworkers = 1\nrequest_timeout_s = 2\n')
        proc = run_cli("--record", "--output", str(tmp_path), "--profile", str(profile))
    token = base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
    assert proc.returncode in (1, 2), (proc.stdout[-2000:], proc.stderr)
    assert "rejected" in proc.stdout + proc.stderr, "the server's error text was not shown: nothing was checked"
    assert_clean(proc.stdout + proc.stderr, token)
    for rec in tmp_path.glob("*.sqlite"):
        with sqlite3.connect(rec) as conn:
            stored = "\n".join(str(row) for table in ("meta", "events")
                               for row in conn.execute(f"SELECT * FROM {table}"))  # noqa: S608 - our own tables
        assert_clean(stored, token)
