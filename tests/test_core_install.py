"""The core install (`pip install .`, no extras) is a whole remote client: in a fresh venv with
only the core's dependencies (no torch, scipy, onnx or nvidia-pytriton), a sweep against a remote
server (the session's embedded identity server, started from the full venv), an export and a
compare all work; a feature whose extra is missing says which extra in one line and exits 2. The
same sweep with the platform said to be macOS touches no /proc, /dev/shm or prctl (psutil's own
reads aside: it has its own macOS code).

Needs the package registry (pip resolves the core's dependencies, as a user's install does)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.record.naming import name_slug

# the install lane (`scripts/test.sh` runs it beside the main lane, in one process: the module-scoped
# core venv is built once)
pytestmark = [pytest.mark.install, pytest.mark.slow, pytest.mark.server]

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "setup.py", "README.md", "engine", "tui", "profiles")  # what the wheel is built from
OPTIONAL = ("torch", "scipy", "onnx", "pytriton")


# A bound on a command that hangs, not a measure of speed: on a busy 2-core box a venv, an install
# or a short sweep takes minutes; the tests wait for the command to end, whatever it takes.
HANG_S = 900


def _run(args: list[str], cwd: Path, timeout: float = HANG_S) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the core only, built from a copy of the sources (the repository stays clean:
    pip's build writes build/ and *.egg-info beside the sources)."""
    root = tmp_path_factory.mktemp("core")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, src / name)
    venv = root / "venv"
    # no pip of its own (ensurepip is 3 CPU-s): this venv's pip installs into it, and the modules
    # are compiled as the tests import them rather than all at install
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], root)
    assert made.returncode == 0, made.stderr
    installed = _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                      "--disable-pip-version-check", "--no-compile", str(src)], root)
    assert installed.returncode == 0, installed.stderr[-2000:]
    return venv


def test_the_core_holds_no_extra(core_venv: Path, tmp_path: Path) -> None:
    code = ("import importlib.util as u, json; "
            f"print(json.dumps({{m: u.find_spec(m) is not None for m in {OPTIONAL + ('grpc', 'tritonclient.grpc', 'numpy', 'msgspec')!r}}}))")
    found = json.loads(_run([str(core_venv / "bin" / "python"), "-c", code], tmp_path).stdout)
    # no grpcio: the gRPC transports speak HTTP/2 themselves, tritonclient gives only the messages
    assert found == {**dict.fromkeys(OPTIONAL, False), "grpc": False, "tritonclient.grpc": True, "numpy": True,
                     "msgspec": True}
    code = ("from engine.triton.transports import grpc, grpc_stream; "
            "print(len(grpc.messages().ModelInferRequest(model_name='m').SerializeToString()))")
    built = _run([str(core_venv / "bin" / "python"), "-c", code], tmp_path)
    assert built.returncode == 0 and built.stdout.split() == ["3"], built.stderr[-2000:]


def test_two_load_hosts_form_a_group_on_the_core(core_venv: Path, tmp_path: Path) -> None:
    """Several load hosts need no torch: a head and a member join on loopback, the member's value
    reaches the head sealed (the sweep over a group: tests/engine/multihost/)."""
    code = """
import socket, threading
from engine.multihost.group import HostGroup
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
out = {}
def join(rank):
    out[rank] = HostGroup.join(f"127.0.0.1:{port}", 2, rank, 30.0, "plan", "token")
threads = [threading.Thread(target=join, args=(r,)) for r in (0, 1)]
for t in threads: t.start()
for t in threads: t.join(60)
out[1].set("lvl/0/1", {"requests": 5})
import sys
print(out[0].get("lvl/0/1", sender=1)["requests"], "torch" in sys.modules)
"""
    joined = _run([str(core_venv / "bin" / "python"), "-c", code], tmp_path, timeout=120)
    assert joined.returncode == 0 and joined.stdout.split() == ["5", "False"], joined.stdout + joined.stderr[-2000:]


def test_a_remote_sweep_an_export_and_a_compare_run_on_the_core(core_venv: Path, tmp_path: Path, identity_server) -> None:
    cli = str(core_venv / "bin" / "gpuscale-tui")
    profile = tmp_path / "remote.toml"
    profile.write_text(f'''name = "remote"
[server]
kind = "remote"
url = "{identity_server.http_url}"
metrics_url = "{identity_server.metrics_url}"
[model]
name = "identity"
[load]
concurrency = [1, 4]
max_trials = 1  # the box-noise rule off (tests/conftest.py)
contended_percent = 100
window_ms = 300
max_windows = 3
warmup_s = 0.2
''')
    swept = _run([cli, "--profile", str(profile), "--record", "--output", str(tmp_path / "rec")], tmp_path)
    assert swept.returncode == 0, swept.stdout[-2000:] + swept.stderr[-2000:]
    [recording] = (tmp_path / "rec").glob("*.sqlite")

    exported = _run([cli, "export", str(recording), "-f", "json", "--out", str(tmp_path / "out")], tmp_path)
    assert exported.returncode == 0, exported.stderr
    [doc] = (tmp_path / "out").glob("*.json")
    levels = [e for e in json.loads(doc.read_text())["events"] if e["kind"] == "level_result"]
    assert [level["level"] for level in levels] == [1, 4]
    assert all(level["throughput_ips"] > 0 and level["errors"] == 0 for level in levels)

    compared = _run([cli, "compare", str(recording), str(recording), "-f", "md", "--out", str(tmp_path / "cmp.md")], tmp_path)
    assert compared.returncode == 0, compared.stderr
    report = (tmp_path / "cmp.md").read_text()
    # a peak only from a stable level: on a busy box the short levels may all read unstable
    assert report.startswith("# gpuscale-tui comparison") and ("Highest throughput" in report or "not decided" in report)


def test_a_core_install_runs_against_a_url_with_no_profile_file(core_venv: Path, tmp_path: Path, identity_server) -> None:
    """As `perf_analyzer -u URL` does: the URL and the model name, no profile of one's own; the
    session is named after the server's host; `profiles` lists the bundled ones; `init` writes a
    profile that `profiles --check` accepts."""
    cli = str(core_venv / "bin" / "gpuscale-tui")
    sets = ["model.name=identity", "load.concurrency=2", "load.window_ms=300", "load.max_windows=3", "load.warmup_s=0.2"]
    swept = _run([cli, "--record", "--url", identity_server.http_url, *[x for s in sets for x in ("--set", s)],
                  "--output", str(tmp_path / "rec")], tmp_path)
    assert swept.returncode == 0, swept.stdout[-2000:] + swept.stderr[-2000:]
    assert "session ended: ok" in swept.stdout
    [recording] = (tmp_path / "rec").glob("*.sqlite")
    host = identity_server.http_url.partition("://")[2]  # 127.0.0.1:PORT
    assert f"_{name_slug(host)}_" in recording.name and "_local_" not in recording.name, recording.name

    listed = _run([cli, "profiles"], tmp_path)
    assert listed.returncode == 0 and any(line.startswith("4x_rtx4080 ") for line in listed.stdout.splitlines())

    made = _run([cli, "init", "box.toml", "--gpus", "4", "--price", "1.2"], tmp_path)
    assert made.returncode == 0, made.stderr
    checked = _run([cli, "profiles", "--check", "box.toml"], tmp_path)
    assert checked.returncode == 0 and checked.stdout.strip() == "box.toml: ok (box)", checked.stderr


# Loaded by every process of the sweep (the CLI and its load workers) through PYTHONPATH: the
# platform said to be macOS once the modules that pick their platform code at import have it, and
# an audit hook that logs each Linux-only call made outside psutil.
OFF_LINUX = """
import os, sys
import asyncio, platform, psutil, subprocess, urllib.request  # noqa: F401
sys.platform = "darwin"
urllib.request.getproxies = urllib.request.getproxies_environment  # not macOS's _scproxy
LOG = os.environ["LINUX_CALLS_LOG"]

def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes)):
        hit = os.fsdecode(args[0]).startswith(("/proc", "/dev/shm"))
    else:
        hit = event == "ctypes.dlsym" and len(args) > 1 and args[1] == "prctl"
    if hit:
        frame, where = sys._getframe(1), []
        while frame is not None:
            where.append(frame.f_code.co_filename)
            frame = frame.f_back
        if not any("/psutil/" in f for f in where):
            with open(LOG, "a") as fh:
                fh.write(f"{event} {args[:2]!r} {[f for f in where if '/engine/' in f or '/tui/' in f][:3]}\\n")

sys.addaudithook(hook)
"""


def test_a_remote_sweep_off_linux_makes_no_linux_only_call(core_venv: Path, tmp_path: Path, identity_server) -> None:
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "sitecustomize.py").write_text(OFF_LINUX)
    log = tmp_path / "linux_calls.log"
    profile = tmp_path / "remote.toml"
    profile.write_text(f'[server]\nkind = "remote"\nurl = "{identity_server.http_url}"\n'
                       f'metrics_url = "{identity_server.metrics_url}"\n[model]\nname = "identity"\n'
                       '[load]\nconcurrency = [2]\nwindow_ms = 300\nmax_windows = 3\nwarmup_s = 0.2\n'
                       'max_trials = 1\ncontended_percent = 100\ntransport = "auto"\n')
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "fake"), "LINUX_CALLS_LOG": str(log)}
    env.pop("VIRTUAL_ENV", None)
    swept = subprocess.run([str(core_venv / "bin" / "gpuscale-tui"), "--profile", str(profile), "--record",
                            "--output", str(tmp_path / "rec")], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=HANG_S)
    assert swept.returncode == 0, swept.stdout[-2000:] + swept.stderr[-2000:]
    assert "session ended: ok" in swept.stdout
    assert "load.transport = auto: http, this system has no /dev/shm" in swept.stdout  # a server on loopback
    assert not log.exists(), log.read_text()[:3000]


@pytest.mark.parametrize(("args", "extra"), [
    (["--profile", "remote.toml", "--probe-only", "--no-record", "--headless"], "probe"),
    (["model", "export", "--out", "models"], "model"),
    (["server"], "server"),
])
def test_a_missing_extra_is_one_line_naming_it(core_venv: Path, tmp_path: Path, args: list[str], extra: str) -> None:
    (tmp_path / "remote.toml").write_text('[server]\nkind = "remote"\nurl = "http://127.0.0.1:9"\n')
    ran = _run([str(core_venv / "bin" / "gpuscale-tui"), *args], tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "Traceback" not in ran.stdout + ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("gpuscale-tui: error:")]
    assert len(errors) == 1 and f"pip install 'gpuscale-tui[{extra}]'" in errors[0], ran.stderr
