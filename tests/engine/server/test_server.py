"""The embedded server against the real tritonserver: start, infer, stop, and never an orphan."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil
import pytest

from engine.server.embedded import EmbeddedServer, PortTaken, ServerStartError, port_taken

pytestmark = pytest.mark.server
ROOT = Path(__file__).resolve().parents[3]


def _triton_pids(marker: str) -> set[int]:
    """Processes of one server: their command lines name its private model repository."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return {int(line.split()[0]) for line in out.splitlines() if marker in line}


def _wait_gone(pids: set[int], timeout: float = 15.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = {p for p in pids if Path(f"/proc/{p}").exists() and "zombie" not in _state(p)}
        if not alive:
            return set()
        time.sleep(0.2)
    return alive


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"


def _infer_identity(url: str) -> np.ndarray:
    data = np.arange(32, dtype=np.float32).reshape(2, 16)
    header = json.dumps({
        "inputs": [{"name": "INPUT0", "shape": [2, 16], "datatype": "FP32", "parameters": {"binary_data_size": data.nbytes}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
    }).encode()
    request = urllib.request.Request(f"{url}/v2/models/identity/infer", data=header + data.tobytes(),
                                     headers={"Inference-Header-Content-Length": str(len(header))})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
        json_len = int(response.headers["Inference-Header-Content-Length"])
    return np.frombuffer(body[json_len:], dtype=np.float32).reshape(2, 16)


def test_start_infer_stop_leaves_nothing(tmp_path):
    server = EmbeddedServer(model="identity", variant="auto", log_dir=tmp_path)
    with server:
        assert server.http_url.startswith("http://127.0.0.1:")
        assert server.variant == "cpu"
        out = _infer_identity(server.http_url)
        np.testing.assert_array_equal(out, np.arange(32, dtype=np.float32).reshape(2, 16))
        with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
            assert "nv_inference_request_success" in response.read().decode()
        assert server.server_metadata()["version"]
        guard = psutil.Process(server.pid)
        ours = {guard.pid, *(p.pid for p in guard.children(recursive=True))}
        assert any("tritonserver" in " ".join(psutil.Process(p).cmdline()) for p in ours)
    assert not _wait_gone(ours), "tritonserver or a stub outlived stop()"
    assert (tmp_path / "tritonserver.log").stat().st_size > 0


@pytest.mark.slow
def test_a_server_given_cpus_runs_there_with_its_stubs(tmp_path):
    ours = os.sched_getaffinity(0)
    cpu = max(ours)  # one core, apart from this process's others
    with EmbeddedServer(model="identity", variant="auto", log_dir=tmp_path, cpus=(cpu,)) as server:
        guard = psutil.Process(server.pid)
        procs = guard.children(recursive=True)
        assert any(p.name().startswith("triton_python_b") for p in procs), [p.name() for p in procs]
        for proc in procs:  # tritonserver and its Python stubs, every thread of each
            for thread in proc.threads():
                assert os.sched_getaffinity(thread.id) == {cpu}, (proc.name(), thread.id)
        np.testing.assert_array_equal(_infer_identity(server.http_url), np.arange(32, dtype=np.float32).reshape(2, 16))
    assert os.sched_getaffinity(0) == ours  # the caller's own CPUs are untouched


def _group(pgid: int) -> dict[int, str]:
    """Every process of a process group, zombies included: pid -> "comm state" (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        comm = stat[stat.index(b"(") + 1:stat.rfind(b")")].decode(errors="replace")
        state, _ppid, pgrp = stat[stat.rfind(b")") + 2:].split()[:3]
        if int(pgrp) == pgid:
            found[int(entry.name)] = f"{comm} {state.decode()}"
    return found


def _stubs(group: dict[int, str]) -> list[int]:
    return [pid for pid, what in group.items() if what.startswith("triton_python_b")]


def test_stop_returns_when_the_server_and_its_stubs_are_gone(tmp_path):
    # cpu2: two model instances, two Python-backend stubs. Right when stop() returns, nothing of
    # the server's process group may be left (not even a zombie): a study starts the next
    # server, and reads the GPUs, at once
    server = EmbeddedServer(model="identity", variant="cpu2", log_dir=tmp_path).start()
    pgid = server.pid
    assert pgid is not None
    try:
        assert len(_stubs(_group(pgid))) == 2, _group(pgid)
    finally:
        server.stop()
    assert _group(pgid) == {}


def test_stop_after_the_server_died_leaves_no_stub(tmp_path):
    # tritonserver killed under its stubs (a crash): they are orphaned and must still be gone,
    # and reaped, when stop() returns
    server = EmbeddedServer(model="identity", variant="cpu2", log_dir=tmp_path).start()
    pgid = server.pid
    assert pgid is not None
    try:
        group = _group(pgid)
        (triton,) = [pid for pid, what in group.items() if what.startswith("tritonserver")]
        assert len(_stubs(group)) == 2, group
        os.kill(triton, signal.SIGKILL)
    finally:
        server.stop()
    assert _group(pgid) == {}
    assert server.left_behind == []


CRASHER = """
import os, sys
from pathlib import Path
from engine.server.embedded import EmbeddedServer
server = EmbeddedServer(model="identity", variant="cpu", log_dir=Path(sys.argv[1])).start()
print(server.http_url, server.prepared.repository, flush=True)
os.kill(os.getpid(), 9)   # our own crash: no cleanup code runs
"""


def test_no_orphan_after_our_process_is_killed(tmp_path):
    proc = subprocess.run([sys.executable, "-c", CRASHER, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    url, repository = proc.stdout.split()
    assert url.startswith("http://127.0.0.1:")
    orphans = _wait_gone(_triton_pids(repository))
    assert not orphans, f"tritonserver left behind after SIGKILL of its owner: {orphans}"
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/v2/health/live", timeout=2)


def test_start_failure_reports_the_log_tail(tmp_path, monkeypatch):
    # a model whose code fails to load: tritonserver exits during start-up (--exit-on-error)
    from engine.server import repository

    bad_root = tmp_path / "embedded"
    (bad_root / "broken" / "1").mkdir(parents=True)
    (bad_root / "broken" / "config.pbtxt").write_text(
        'name: "broken"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        "instance_group [ { count: 1 kind: KIND_CPU } ]\n"
    )
    (bad_root / "broken" / "1" / "model.py").write_text("raise RuntimeError('this model cannot load')\n")
    monkeypatch.setattr(repository, "EMBEDDED_ROOT", bad_root)
    server = EmbeddedServer(model="broken", variant="cpu", log_dir=tmp_path, startup_timeout_s=60)
    with pytest.raises(ServerStartError) as info:
        server.start()
    assert "last lines of the server log" in str(info.value)
    assert "this model cannot load" in str(info.value)
    assert not server.alive()


def test_the_ports_of_one_server_are_distinct():
    """Probed one at a time, the gRPC and metrics ports once came out equal and Triton refused
    to start; picked together, they cannot."""
    from engine.server.ports import free_ports

    for _ in range(50):
        assert len(set(free_ports(3))) == 3


def test_ports_are_picked_below_the_range_that_outgoing_connections_take():
    """A port from the ephemeral range can become a client connection's local port while its
    server restarts on it (seen: "Socket '127.0.0.1:46568' already in use" in the restart test)."""
    from engine.server.ports import free_ports, listen_range

    low, high = listen_range()
    with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
        assert high <= max(low + 1000, int(fh.read().split()[0]))
    ports = [p for _ in range(20) for p in free_ports(3)]
    assert all(low <= p < high for p in ports)
    assert len(set(ports)) > 3  # random, not one fixed port


def test_a_taken_http_port_is_told_apart_from_other_start_failures(tmp_path):
    """Triton's HTTP front end says "Socket '...' already in use" (gRPC says "Address already in
    use"): a free port's start is then retried on new ports, a fixed one's fails at once."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        server = EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path, http_port=port)
        with pytest.raises(PortTaken) as info:
            server.start()
    assert f"127.0.0.1:{port}' already in use" in str(info.value)
    assert not server.alive()
    assert port_taken("Address already in use") and not port_taken("this model cannot load")
