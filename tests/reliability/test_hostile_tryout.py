"""Issue 53's hostile cases as a new user meets them (scripts/tryout_hostile.sh's checks, one level
each): the real CLI, headless and recording, against each hostile peer of the tests
(tests/reliability/hostile_peers.py), then `merge` given one session twice. Each case ends with
one line on stderr naming why, exit 1 (2 for merge's refusal), no traceback; the recording on disk
before it is byte for byte the same and still exports; the case's own recording keeps the level it
measured and exports and replays. The rendezvous cases stay in the script and in
tests/tui/test_hosts_cli.py (two processes each: seconds).

The runs, the case's own replay, one case's own export, and merge's first refusal are the real
`python -m tui.cli`; the other cases' own exports, the check that the earlier recording still
exports, and merge's second refusal, call `tui.cli.main` in this process (tests/cli_runner.py:
no thread, no server)."""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_runner import ROOT, run_cli, run_cli_inproc
from tests.engine.record.test_merge import Host, recorded

pytestmark = pytest.mark.slow  # a peer and the CLI in subprocesses: seconds each
ONE_LEVEL = ["--no-check", "--set", "load.window_ms=300", "--set", "load.warmup_s=0.2", "--set", "load.max_windows=3",
             "--set", "load.workers=1", "--set", "load.max_trials=1", "--set", "load.contended_percent=100",
             "--set", "load.request_timeout_s=3", "--set", "load.concurrency=1", "--set", "model.name=toy",
             "--set", "load.tokens_from=COUNT"]
SAID = {  # what the level's error names: the server's answer, never a timeout or silent workers
    "bad-setting": "SETTINGS_MAX_FRAME_SIZE of 0, outside 16384..16777215",
    "ping-flood": "a flood of control frames: more than 1000 PING/SETTINGS in a second",
    "settings-flood": "a flood of control frames: more than 1000 PING/SETTINGS in a second",
    "huffman": "connection lost: gRPC INTERNAL: ",  # the server's message, cut short
    "counts-grpc": "the server answered a token count of 4611686018427387904 in COUNT",
    "counts-sse": "the server answered a token count of 4611686018427387904 in COUNT",
    "sse-size-line": "a chunk size line longer than 1024 bytes",
    "sse-nested": "an event whose data is not JSON (RecursionError",
    "mostly-failed": "most requests failed: rejected x",
}


REAL_EXPORT = "huffman"  # the case whose own recording `python -m tui.cli export` reads
_cli = functools.partial(run_cli, timeout=180)  # the shared CLI runner, with room for a hostile server's stalls


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def on_disk(tmp_path: Path) -> Iterator[tuple[Path, Path, str]]:
    """A folder of recordings with one already in it (the real Recorder's), and its digest."""
    folder = tmp_path / "rec"
    folder.mkdir()
    before = recorded(folder, Host("before", 1))
    yield folder, before, _sha(before)


@pytest.fixture
def peer(request: pytest.FixtureRequest) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.reliability.hostile_peers", request.param], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url + proc.stdout.read()
        yield url
    finally:
        proc.kill()
        proc.wait(30)


def _still_there(before: Path, digest: str, export_to: Path) -> None:
    assert before.exists() and _sha(before) == digest  # not a byte of it changed
    exported = run_cli_inproc("export", str(before), "--format", "json", "--out", str(export_to))
    assert exported.returncode == 0, exported.stderr


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("peer", sorted(SAID), indirect=True)
def test_a_hostile_peer_fails_the_run_in_one_line_and_loses_no_recording(peer: str, on_disk: tuple[Path, Path, str],
                                                                          request: pytest.FixtureRequest) -> None:
    case = request.node.callspec.params["peer"]
    folder, before, digest = on_disk
    transport = "generate_stream" if case.startswith(("sse", "counts-sse", "mostly")) else "grpc_stream"
    proc = _cli("run", "--record", "-o", str(folder), "--url", peer, "--set", f"load.transport={transport}", *ONE_LEVEL)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _one_line(proc).startswith("gpuscale-tui: failed: 1 of 1 levels failed (level ")
    assert SAID[case] in proc.stdout and "did not answer" not in proc.stdout and "no response within" not in proc.stdout
    _still_there(before, digest, folder.parent / "export")
    (own,) = set(folder.glob("*.sqlite")) - {before}  # the case's own: the level it measured, failed
    # the real entry point exports one case's recording; the others' through tui.cli.main here
    # (an export starts nothing: the same code, without a fresh interpreter's imports)
    export = _cli if case == REAL_EXPORT else run_cli_inproc
    exported = export("export", str(own), "--format", "json", "--out", str(folder.parent / "export"))
    assert exported.returncode == 0, exported.stderr
    doc = json.loads((folder.parent / "export" / f"{own.stem}.json").read_text())
    assert "failed" in json.dumps(doc) and SAID[case].split(" x")[0][:40] in json.dumps(doc)
    replayed = _cli("replay", "--headless", str(own))
    assert replayed.returncode in (0, 1) and "Traceback" not in replayed.stdout + replayed.stderr
    assert SAID[case] in replayed.stdout


def test_merge_given_one_session_twice_or_a_copy_refuses_in_one_line_and_touches_nothing(
        on_disk: tuple[Path, Path, str]) -> None:
    folder, before, digest = on_disk
    other = recorded(folder, Host("other", 2))
    copy = folder.parent / "copies" / before.name  # a byte copy under the same name, caught by a glob
    copy.parent.mkdir()
    shutil.copyfile(before, copy)
    for given, words in (([before, before], "(given twice)"),
                         ([before, other, copy], f"({before.resolve()} and {copy.resolve()})")):
        out = folder.parent / "merged.sqlite"
        cli = _cli if len(given) == 2 else run_cli_inproc  # the first refusal through the real entry point
        proc = cli("merge", *map(str, given), "-o", str(out))
        assert proc.returncode == 2 and not out.exists()
        line = _one_line(proc)
        assert "session s-before is in the recordings twice" in line and words in line, line
        _still_there(before, digest, folder.parent / "export")
