"""Several servers at once, honestly: one server given twice (two spellings of its address) is
refused, a server dead for a level marks that level degraded and the run not ok, and a password
goes only to the host and port it was written for. Against loopback servers that pass for Triton
(tests/reliability/hostile_server.py), through the command line."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from engine.events import LevelResult
from engine.record.reader import Recording
from tests.cli_runner import run_cli
from tests.reliability.hostile_server import HostileTriton, Reply, remote_profile
from tests.reliability.test_bad_input import assert_one_line_exit_2

PASSWORD = "m3tricsOnly42"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=180)


@pytest.mark.slow
def test_one_server_given_twice_is_refused(tmp_path: Path):
    """127.0.0.1:P and localhost:P are one server: counted twice, its throughput, statistics and
    GPUs were all doubled, exit 0."""
    with HostileTriton() as srv:
        port = srv.where.rpartition(":")[2]
        proc = run_cli("--record", "--no-check", "--output", str(tmp_path), "--profile",
                       remote_profile(tmp_path / "p.toml", srv.where),
                       "--url", f"http://127.0.0.1:{port}", "--url", f"http://localhost:{port}")
        assert not [s for s in srv.seen if s.path.endswith("/infer")]
    assert_one_line_exit_2(proc, f"endpoint ep2 (http://localhost:{port}) is the same server as ep1")


@pytest.mark.slow
def test_a_dead_endpoint_degrades_its_level_and_the_run_is_not_ok(tmp_path: Path):
    """One of two servers answers nothing (503s) for the whole level: the other goes on, the
    level is marked degraded, and the session ends failed, not ok."""
    with HostileTriton() as good, HostileTriton(infer=Reply(503, {"error": "down"})) as dead:
        profile = remote_profile(tmp_path / "p.toml", good.where, levels="[2]")  # one connection each
        proc = _cli("--record", "--no-check", "--output", str(tmp_path), "--profile", profile,
                    "--url", good.url, "--url", dead.url)
        assert good.answered > 0
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text[-3000:]
    assert "Traceback" not in text
    assert "level 2 degraded: ep2 answered nothing in" in text, text[-3000:]
    assert "1 level(s) degraded, missing an endpoint" in proc.stderr, proc.stderr
    assert "0 failed, 1 degraded (no decision rests on it)" in proc.stdout  # the sweep line says so too
    assert "best:" not in proc.stdout  # no best throughput (nor $/1000) from a half-measured level
    (recording,) = tmp_path.glob("*.sqlite")
    with Recording.open(recording) as rec:
        (level,) = [e for e in rec.events(("level_result",)) if isinstance(e, LevelResult)]
        ended = list(rec.events(("session_ended",)))
    assert level.degraded.startswith("ep2 answered nothing") and level.status != "failed"
    assert ended and ended[-1].status == "failed" and ended[-1].exit_code == 1


@pytest.mark.slow
def test_a_metrics_password_goes_only_to_the_metrics_server(tmp_path: Path):
    """A password written only in metrics_url (box B) went as Basic auth on every inference
    request to box A; and --url C over that profile sent it to C."""
    basic = "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
    with HostileTriton() as a, HostileTriton() as b, HostileTriton() as c:
        profile = tmp_path / "p.toml"
        remote_profile(profile, a.where)
        profile.write_text(profile.read_text().replace(f'metrics_url = "http://{a.where}/metrics"',
                                                       f'metrics_url = "http://bob:{PASSWORD}@{b.where}/metrics"'))
        first = _cli("--record", "--no-check", "--output", str(tmp_path / "one"), "--profile", str(profile))
        second = _cli("--record", "--no-check", "--output", str(tmp_path / "two"), "--profile", str(profile),
                      "--url", c.url)
        for proc in (first, second):
            assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
            assert PASSWORD not in proc.stdout + proc.stderr
        for inference in (a, c):
            assert [s for s in inference.seen if s.path.endswith("/infer")]
            sent = {s.headers.get("Authorization") for s in inference.seen}
            assert sent == {None}, sent
        scraped = [s for s in b.seen if s.path == "/metrics"]
        assert scraped and all(s.headers.get("Authorization") == basic for s in scraped)
        assert all(s.path == "/metrics" for s in b.seen)  # B was asked nothing else
