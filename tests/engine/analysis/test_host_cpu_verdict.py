"""The verdict when the server shares the measuring host and the host's CPUs are full: "host CPU",
with each party's share from the process table, not "client-bound"."""

from __future__ import annotations

import os

import pytest

from engine.analysis.bottleneck import LevelEvidence, cpu_shares, diagnose
from engine.analysis.saturation import saturation_point
from engine.telemetry.host import split_tree

ROOT = 100  # the session process

# A synthetic process table below the session: two load workers, the embedded server's launcher,
# tritonserver, its three Python backend stubs, and a helper of ours
PARENTS = {101: ROOT, 102: ROOT, 110: ROOT, 111: 110, 112: 111, 113: 111, 114: 111, 120: ROOT}
NAMES = {101: "python3", 102: "python3", 110: "sh", 111: "tritonserver", 112: "triton_python_backend_stub",
         113: "triton_python_backend_stub", 114: "triton_python_backend_stub", 120: "nvidia-smi"}


def test_the_process_table_splits_into_ours_and_the_servers() -> None:
    ours, server = split_tree(PARENTS, NAMES, ROOT, ("tritonserver",))
    assert server == {111, 112, 113, 114}  # tritonserver and every stub below it
    assert ours == {ROOT, 101, 102, 110, 120}


def _level(level: float, tp: float, **kw: object) -> LevelEvidence:
    base: dict = dict(latency_mean=0.2, queue=0.01, compute=0.05, client_minus_server=0.05, gpu_util={"g": 40.0})
    base.update(kw)
    return LevelEvidence(level=level, throughput=tp, **base)


def _full_host_sweep() -> list[LevelEvidence]:
    # 1x H200 box, 16 cores, embedded server: the host 90 % busy from 8 up; the server's processes
    # use 9.6 cores (60 % of the host), our workers 4 (25 %), the rest 5 %
    full = dict(host_cpu_percent=90.0, server_cpu_percent=960.0, own_cpu_percent=400.0, client_bound=True,
                client_cpu_percent=400.0, client_reasons=("load workers at 100 % CPU",))
    return [_level(1, 20), _level(4, 70), _level(8, 80, **full), _level(16, 81, **full)]


def _diagnose(levels: list[LevelEvidence], local: bool) -> object:
    return diagnose(levels, saturation_point([(e.level, e.throughput) for e in levels]), 1,
                    server_local=local, host_cores=16)


def test_a_full_host_shared_with_the_server_is_host_cpu_not_client_bound() -> None:
    v = _diagnose(_full_host_sweep(), local=True)
    assert v.kind == "host-cpu"  # type: ignore[attr-defined]
    text = " ".join(v.evidence)  # type: ignore[attr-defined]
    assert "server's processes 60%" in text and "our load generator 25%" in text and "others 5.0%" in text
    assert "shared memory" in text and "another machine" in text and "fewer" in text


def test_a_remote_server_keeps_the_client_bound_verdict() -> None:
    assert _diagnose(_full_host_sweep(), local=False).kind == "client-bound"  # type: ignore[attr-defined]


def test_full_gpus_are_not_blamed_on_the_host() -> None:
    levels = [_level(1, 20), _level(4, 70), *(
        _level(lv, tp, host_cpu_percent=95.0, gpu_util={"g": 97.0}) for lv, tp in ((8, 80), (16, 81)))]
    assert _diagnose(levels, local=True).kind == "compute"  # type: ignore[attr-defined]


def test_shares_without_the_servers_figure_say_so() -> None:
    shares = cpu_shares(_level(8, 80, host_cpu_percent=92.0, own_cpu_percent=320.0), 16)
    assert shares is not None and shares.server is None and shares.ours == 20.0
    assert "not recorded" in shares.describe(16)


def test_loopback_port() -> None:
    from engine.telemetry.host import loopback_port

    assert loopback_port("http://127.0.0.1:8000") == 8000
    assert loopback_port("http://localhost:8001/v2") == 8001
    assert loopback_port("http://[::1]:9000") == 9000
    assert loopback_port("http://10.0.0.5:8000") is None  # another machine: its CPU is not this host's
    assert loopback_port("http://127.0.0.1") is None
    assert loopback_port(None) is None


@pytest.mark.slow
def test_a_server_on_this_machine_that_is_not_ours_is_found_by_its_port() -> None:
    import subprocess
    import sys
    import time

    from engine.telemetry.host import HostReader

    # a listener outside our tree that burns some CPU: what a remote-mode tritonserver on this host is to us
    code = ("import socket, time\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
            "print(s.getsockname()[1], flush=True)\nend = time.time() + 30\nwhile time.time() < end: pass\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        reader = HostReader(root_pid=os.getpid(), server_port=port)
        reader.read(time.time())
        # found by its port: a figure (a number) for the server at every sample; how much CPU it
        # gets on a loaded box is the scheduler's business, so the amount is not asserted
        seen = []
        for _ in range(3):
            time.sleep(0.3)
            seen.append(reader.read(time.time()).server_cpu_percent)
        assert all(isinstance(x, float) and x >= 0.0 for x in seen), seen
        assert HostReader(root_pid=os.getpid()).read(time.time()).server_cpu_percent is None
    finally:
        proc.kill()
        proc.wait()


def _contended_sweep(wait: float | None) -> list[LevelEvidence]:
    # As measured on 1x H200 (docs/results/host_cpu_verdict_h200.md): at c=128 the host 85 % busy,
    # the server's processes 12.6 cores, our 4 workers under one core and waiting for a CPU 25 %
    # of the level; the audit flags the level client-bound for that lag.
    busy = dict(host_cpu_percent=85.0, server_cpu_percent=1260.0, own_cpu_percent=102.0, client_bound=True,
                client_cpu_percent=95.0, client_cpu_wait=wait,
                client_reasons=("event-loop lag p99 7.1 ms: a worker waiting for a CPU 25 % of the time",))
    return [_level(1, 290), _level(32, 4041), _level(64, 5289, **busy), _level(128, 5781, **busy)]


def test_a_nearly_full_host_whose_workers_wait_for_a_cpu_is_host_cpu() -> None:
    v = _diagnose(_contended_sweep(0.25), local=True)
    assert v.kind == "host-cpu", v  # type: ignore[attr-defined]
    assert "server's processes 79%" in " ".join(v.evidence)  # type: ignore[attr-defined]


def test_without_run_queue_waits_a_nearly_full_host_stays_client_bound() -> None:
    assert _diagnose(_contended_sweep(0.02), local=True).kind == "client-bound"  # type: ignore[attr-defined]
    assert _diagnose(_contended_sweep(None), local=True).kind == "client-bound"  # type: ignore[attr-defined]
