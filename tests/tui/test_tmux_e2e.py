"""The real app in a real terminal (tmux) against the embedded Triton server: a sweep runs and
renders, the keys work, quitting finalises the recording. A hang-up (SSH gone) exiting cleanly,
with the recording finalised and no child process left, is tested with the other faults of the TUI
in tests/reliability/test_signals_and_kills.py.

Slow (a real server and sweep per test): `pytest -m "not slow"` skips it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from engine.record.reader import Recording

pytestmark = [
    pytest.mark.server,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

REPO = Path(__file__).resolve().parents[2]
FAST_SWEEP = [
    "--profile", "local",
    "--set", "load.max_trials=1", "--set", "load.contended_percent=100",  # the box-noise rule off (tests/conftest.py)
    "--set", "model.name=identity",  # near-zero compute: windows fill in well under a second
    "--set", "load.window_ms=500",
    "--set", "load.max_windows=4",
    "--set", "load.warmup_s=0.5",
]


class Tmux:
    """A private tmux server (its own socket), so that nobody else's sessions are touched."""

    def __init__(self) -> None:
        self.socket = f"gpuscale-tui-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    def __call__(self, *args: str) -> str:
        result = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=15)
        return result.stdout

    def start(self, command: str, width: int = 80, height: int = 24) -> int:
        self("new-session", "-d", "-s", "app", "-x", str(width), "-y", str(height), command,
             ";", "set-option", "remain-on-exit", "on")
        return int(self("list-panes", "-t", "app", "-F", "#{pane_pid}").split()[0])

    def screen(self, history: bool = False) -> str:
        # -J joins wrapped lines; with history, what scrolled off the top is included too.
        return self("capture-pane", "-p", "-J", *(["-S", "-200"] if history else []), "-t", "app")

    def keys(self, *keys: str) -> None:
        self("send-keys", "-t", "app", *keys)

    def dead(self) -> bool:
        return self("list-panes", "-t", "app", "-F", "#{pane_dead}").strip() == "1"

    def wait_for(self, pattern: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(0.25)
        raise AssertionError(f"{pattern!r} not on screen after {timeout:.0f} s:\n{screen}")

    def wait_gone(self, pattern: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not re.search(pattern, self.screen()):
                return
            time.sleep(0.25)
        raise AssertionError(f"{pattern!r} still on screen after {timeout:.0f} s")

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=15)


@pytest.fixture
def tmux():
    t = Tmux()
    yield t
    t.kill()


def app_command(out_dir: Path, *extra: str) -> str:
    args = [sys.executable, "-m", "tui.cli", *FAST_SWEEP, *extra, "-o", str(out_dir)]
    return f"cd {shlex.quote(str(REPO))} && exec " + " ".join(shlex.quote(a) for a in args)


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def wait_gone(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    return alive


def the_recording(out_dir: Path) -> Path:
    (path,) = out_dir.glob("*.sqlite")
    return path


def test_sweep_renders_keys_work_and_quit_finalises_the_recording(tmux: Tmux, tmp_path: Path) -> None:
    pid = tmux.start(app_command(tmp_path, "--set", "load.concurrency=1,4"))
    screen = tmux.wait_for(r"sweep done: \d+ levels", timeout=180)
    assert "sweep · concurrency · 2/2 levels" in screen
    rows = [line for line in screen.splitlines() if re.match(r"^\s+(1|4)\s+[\d.,]+\s", line)]
    assert len(rows) == 2, screen
    assert "infer/s" in screen and "p99" in screen
    assert "the model runs on the CPU" in screen  # no GPU here: said, not drawn as zeros

    tmux.keys("2")
    tmux.wait_for(r"windows of level 4", timeout=15)
    tmux.keys("4")
    tmux.wait_for(r"event log", timeout=15)
    tmux.keys("?")
    tmux.wait_for(r"help · esc closes", timeout=15)
    tmux.keys("Escape")  # alone: ESC followed at once by a key would read as alt+key
    tmux.wait_gone(r"help · esc closes", timeout=15)
    tmux.keys("1")
    tmux.wait_for(r"GPUs", timeout=15)

    children = descendants(pid)
    assert children, "the session should have started the embedded server"
    tmux.keys("q")
    tmux.wait_for(r"The session is idle\. Quit\?", timeout=15)  # the sweep is done: nothing runs
    tmux.keys("y")
    deadline = time.monotonic() + 90
    while not tmux.dead() and time.monotonic() < deadline:
        time.sleep(0.25)
    assert tmux.dead()
    assert not wait_gone(children, timeout=20)

    path = the_recording(tmp_path)
    assert f"recording: {path}" in tmux.screen(history=True)
    with Recording.open(path) as recording:
        counts = recording.event_counts()
    assert counts.get("session_ended") == 1 and counts.get("level_result") == 2


def test_ctrl_c_twice_mid_sweep_exits_130_and_keeps_the_recording(tmux: Tmux, tmp_path: Path) -> None:
    out, rc = tmp_path / "out", tmp_path / "rc"
    command = app_command(out, "--set", "load.concurrency=1,2,4,8,16", "--set", "load.max_windows=40",
                          "--set", "load.stability_percent=0.001", "--set", "load.workers=1")
    # the shell writes the exit code (tmux's pane_dead_status can come late or never)
    pid = tmux.start(command.replace(" && exec ", " && ") + f"; echo $? > {shlex.quote(str(rc))}")
    tmux.wait_for(r"level 1/5", timeout=180)
    children = descendants(pid)
    tmux.keys("C-c")
    screen = tmux.wait_for(r"Stop it and quit\?", timeout=15)
    assert "ctrl+q" not in screen  # Textual's own hint is not what ctrl+c does here
    tmux.keys("C-c")
    deadline = time.monotonic() + 90
    while not (rc.exists() and rc.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert rc.read_text().strip() == "130"
    assert not wait_gone(children, timeout=20)
    path = the_recording(out)
    assert f"recording: {path}" in tmux.screen(history=True)
    with Recording.open(path) as recording:
        assert recording.event_counts().get("session_ended") == 1


# a hang-up (the terminal goes away mid-sweep): tests/reliability/test_signals_and_kills.py::
# test_tui_hang_up_keeps_the_level_and_ends_interrupted, one TUI run for what both files asked of it
