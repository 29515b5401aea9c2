"""A starting server is given up only when it stops making progress (no log line, no CPU time),
not at a fixed time: the rule alone, the CPU reading on a real process group, and a real
tritonserver whose start takes longer than server.startup_timeout_s yet keeps going."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from engine.server.embedded import EmbeddedServer
from engine.server.startup import MAX_QUIETS, StartupProgress, group_cpu_ticks, next_probe_timeout


def test_progress_resets_the_wait_and_quiet_ends_it():
    wait = StartupProgress(quiet_s=10, started=0.0)
    wait.observe(0.0, log_size=100, cpu_ticks=5)
    for t in range(1, 50):  # 49 s: far past quiet_s, with progress every second
        wait.observe(float(t), log_size=100, cpu_ticks=5 + t)
        assert wait.given_up(float(t)) is None
    wait.observe(55.0, log_size=100, cpu_ticks=54)  # nothing new since t=49
    assert wait.given_up(58.0) is None
    why = wait.given_up(59.0)
    assert why is not None and why.startswith("no progress for 10 s")


def test_a_longer_log_alone_is_progress():
    wait = StartupProgress(quiet_s=5, started=0.0)
    wait.observe(0.0, 10, 0)
    wait.observe(4.0, 11, 0)
    assert wait.given_up(8.0) is None and wait.given_up(9.0) is not None


def test_endless_progress_is_bounded():
    wait = StartupProgress(quiet_s=1, started=0.0)
    for t in range(MAX_QUIETS * 4):
        wait.observe(t / 4, 0, t)
    assert wait.given_up(MAX_QUIETS - 0.25) is None
    assert "still starting" in (wait.given_up(float(MAX_QUIETS)) or "")


def test_probe_timeouts_grow_to_a_bound():
    seen = [1.0]
    for _ in range(10):
        seen.append(next_probe_timeout(seen[-1]))
    assert seen[:4] == [1.0, 2.0, 4.0, 8.0] and seen[-1] == 30.0


def test_group_cpu_ticks_counts_a_busy_group():
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 0.5\n"
                             "while time.process_time() < end: pass\ntime.sleep(60)"], start_new_session=True)
    try:
        first = group_cpu_ticks(busy.pid)
        while group_cpu_ticks(busy.pid) < first + 10:  # 10 ticks of CPU: the loop ran, whatever the box's load
            assert busy.poll() is None
            time.sleep(0.05)
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()
    assert group_cpu_ticks(busy.pid) == 0  # the group is gone


@pytest.mark.server
@pytest.mark.slow
def test_a_start_longer_than_the_timeout_that_keeps_going_succeeds(tmp_path):
    # vit_tiny on the CPU, two instances, on one core: its stubs import torch one after the other
    # with the log silent meanwhile (about 4 s here idle, under 3 s on two free cores of a faster
    # box); the CPU they spend is the progress. The timeout stays above Triton's own silent,
    # CPU-less pause early in a start (about 1.2 s), which a real hang would also look like
    timeout_s = 2.5
    one_core = (min(os.sched_getaffinity(0)),)
    started = time.monotonic()
    with EmbeddedServer(model="vit_tiny", variant="cpu2", log_dir=tmp_path, startup_timeout_s=timeout_s,
                        cpus=one_core) as server:
        took = time.monotonic() - started
        assert server.alive()
    assert took > timeout_s, f"started in {took:.1f} s: too fast to show the rule (raise the model's size)"
