"""Drive the real app as a user would (a subprocess), and look at what it leaves behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from engine.record.reader import Recording

ROOT = Path(__file__).resolve().parents[2]
QUICK = [  # a short sweep on the near-zero-compute model; the box-noise rule off (tests/conftest.py)
    "--set", "model.name=identity", "--set", "load.window_ms=400", "--set", "load.warmup_s=0.3",
    "--set", "load.max_windows=4", "--set", "load.workers=1",
    "--set", "load.max_trials=1", "--set", "load.contended_percent=100",
    "--no-check",  # the box check before the server starts (a second a run) is none of these tests' subject
]


def start_app(out_dir: Path, *args: str, env: dict[str, str] | None = None, **popen) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "--record", "--output", str(out_dir), *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **(env or {})}, start_new_session=True, **popen,
    )


def recording_in(out_dir: Path, timeout: float = 60.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(out_dir.glob("*.sqlite"))
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no recording appeared in {out_dir}")


def kinds(path: Path) -> list[str]:
    with Recording.open(path) as rec:
        return [event.kind for event in rec.events()]


def wait_for_kind(path: Path, kind: str, timeout: float = 90.0, count: int = 1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with Recording.open(path) as rec:
                if rec.event_counts().get(kind, 0) >= count:
                    return
        except Exception:  # the file may be mid-creation
            pass
        time.sleep(0.2)
    raise AssertionError(f"no {kind} event in {path} within {timeout} s")


def family(pid: int) -> list[psutil.Process]:
    """The app and every process it started: load workers, the server guard, tritonserver, stubs
    (the server has its own session, but it is still the app's descendant)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    return procs


def wait_all_gone(procs: list[psutil.Process], timeout: float = 20.0) -> list[psutil.Process]:
    gone, alive = psutil.wait_procs(procs, timeout=timeout)
    return [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGINT, timeout: float = 60.0) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"app did not exit within {timeout} s after signal {sig}:\n{out}") from None
    return proc.returncode, out


_PEAK = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[2:]).returncode
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


def run_measured(tmp_path: Path, *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], int]:
    """``gpuscale-tui ARGS`` and its peak RSS in KiB: the kernel's count of the tool's process,
    read by a fresh parent that has no other child."""
    out = tmp_path / "peak_kib"
    proc = subprocess.run([sys.executable, "-c", _PEAK, str(out), sys.executable, "-m", "tui.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    return proc, int(out.read_text())
