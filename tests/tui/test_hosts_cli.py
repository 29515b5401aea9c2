"""Several client hosts from the command line: a bad rendezvous, an address that is not one, a
group that never forms, a plan the hosts cannot split: one line and exit 2, within the wait the
user set, never a hang."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each starts the CLI, two for a group: a second or more each
ROOT = Path(__file__).resolve().parents[2]
BASE = ["run", "--record", "--no-record", "--no-check", "--url", "http://127.0.0.1:9", "--set", "model.name=identity",
        "--set", "load.max_trials=1", "--set", "load.contended_percent=100", "--set", "load.concurrency=4"]


ENV = {**os.environ, "GPUSCALE_RENDEZVOUS_TOKEN": "a-shared-token"}  # as a scheduler hands it to every host


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_line_exit_2(*args: str, env: dict[str, str] = ENV) -> str:
    proc = subprocess.run([sys.executable, "-m", "tui.cli", *BASE, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_no_head_at_the_rendezvous_is_one_line() -> None:
    port = _free_port()  # nobody listens there
    line = _one_line_exit_2("--hosts", "2", "--rank", "1", "--rendezvous", f"127.0.0.1:{port}",
                            "--rendezvous-timeout", "2")
    assert f"--rendezvous 127.0.0.1:{port}: no head answered within 2 s" in line


def test_a_host_that_never_joins_is_named_by_the_head() -> None:
    line = _one_line_exit_2("--hosts", "3", "--rank", "0", "--rendezvous", f"127.0.0.1:{_free_port()}",
                            "--rendezvous-timeout", "2")
    assert "host(s) of rank 1, 2 did not join within 2 s" in line


@pytest.mark.parametrize("args,said", [
    (["--hosts", "2", "--rank", "1", "--rendezvous", "head-without-port"], "expected HOST:PORT"),
    (["--hosts", "2", "--rank", "1", "--rendezvous", "no-such-host.invalid:29500"], "cannot resolve no-such-host.invalid"),
    (["--hosts", "2", "--rank", "2", "--rendezvous", "127.0.0.1:29500"], "--rank 2: expected 0 to 1"),
    (["--hosts", "2"], "give --rendezvous HOST:PORT"),
    (["--hosts", "1", "--rank", "1", "--rendezvous", "127.0.0.1:29500"], "--hosts 1: a group needs at least 2 hosts"),
    (["--hosts", "8", "--rendezvous", "127.0.0.1:29500"], "load.concurrency 4: below --hosts 8"),
])
def test_bad_group_flags_are_one_line(args: list[str], said: str) -> None:
    assert said in _one_line_exit_2(*args)


def test_hosts_need_the_servers_url() -> None:
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--record", "--no-record", "--no-check",
                           "--set", "load.concurrency=4", "--hosts", "2", "--rendezvous", "127.0.0.1:29500"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "every host sends to the same servers" in proc.stderr, proc.stderr


def test_hosts_with_another_plan_are_refused_on_both_sides() -> None:
    port = _free_port()
    group = ["--hosts", "2", "--rendezvous", f"127.0.0.1:{port}", "--rendezvous-timeout", "30"]
    member = subprocess.Popen([sys.executable, "-m", "tui.cli", *BASE, "--set", "load.concurrency=8", *group,
                               "--rank", "1"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=ENV)
    head_line = _one_line_exit_2(*group, "--rank", "0")  # BASE has load.concurrency=4
    assert "host 1 (" in head_line and "runs another plan than the head" in head_line
    _, member_err = member.communicate(timeout=60)
    assert member.returncode == 2 and "the head refused this host: host 1 runs another plan" in member_err, member_err
    assert len([line for line in member_err.splitlines() if line.strip()]) == 1


def test_a_member_without_the_token_is_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GPUSCALE_RENDEZVOUS_TOKEN"}
    line = _one_line_exit_2("--hosts", "2", "--rank", "1", "--rendezvous", f"127.0.0.1:{_free_port()}", env=env)
    assert "--rank 1: give the head's rendezvous token (--rendezvous-token or GPUSCALE_RENDEZVOUS_TOKEN" in line


def test_the_head_makes_and_prints_a_token_and_a_member_with_another_is_refused() -> None:
    """No token given: the head makes one and prints it; a member with another token is refused
    on both sides, in one line each, and the token is nowhere but the head's notice."""
    env = {k: v for k, v in os.environ.items() if k != "GPUSCALE_RENDEZVOUS_TOKEN"}
    port = _free_port()
    group = ["--hosts", "2", "--rendezvous", f"127.0.0.1:{port}", "--rendezvous-timeout", "30"]
    head = subprocess.Popen([sys.executable, "-m", "tui.cli", *BASE, *group, "--rank", "0"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    member_line = _one_line_exit_2(*group, "--rank", "1", "--rendezvous-token", "not-the-heads", env=env)
    assert "the head's word is not signed with this host's token" in member_line
    _, head_err = head.communicate(timeout=60)
    lines = [line for line in head_err.splitlines() if line.strip()]
    assert head.returncode == 2 and len(lines) == 2, head_err
    assert "rendezvous token: " in lines[0] and "--rendezvous-token or GPUSCALE_RENDEZVOUS_TOKEN" in lines[0]
    assert "store key hello/1: a value not signed with this group's rendezvous token" in lines[1]
