"""NVIDIA's Multi-Process Service (MPS) for the embedded server: whether to use it, and how.

Why. Every model instance of the Python backend is its own process (a stub) with its own CUDA
context, and a GPU without MPS runs one context at a time, switching between them. With inputs
in CUDA shared memory on the first GPU, the stubs of the other GPUs also hold a context there.
Under one MPS daemon the contexts share each GPU: shorter batches, shorter waits between them,
and better scaling over GPUs (docs/results/design_notes.md has the figures).

How. The daemon is private to one server: its pipe and log folders are in the server's scratch
folder, and only processes whose environment names that pipe folder (tritonserver and its
stubs) become its clients; other CUDA programs on the box run as before. The server's guard
(engine/server/guard.py) runs the daemon in the foreground in its own process group, tells it
to quit once tritonserver and its stubs are gone, and kills it with the group whatever happens
to the tool.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import UserError
from engine.server.procs import live_processes

CONTROL = "nvidia-cuda-mps-control"
SETTINGS = ("auto", "on", "off")


@dataclass(frozen=True)
class MpsChoice:
    use: bool
    why: str  # one line for the user: why MPS is or is not used


def find_control() -> str | None:
    """The MPS control program, where the driver's utilities put it (on PATH)."""
    return shutil.which(CONTROL)


def choose(setting: str, gpus: int, control: str | None) -> MpsChoice:
    """Whether the embedded server runs under MPS. ``gpus``: GPUs the model has instances on
    (0: a CPU variant). "on" that cannot be honoured is bad input (UserError); "auto" uses MPS
    where it can, whatever the transport: over CUDA shared memory it gains most; over HTTP and
    system shared memory it is neutral alone, and the more instances per GPU it allows pay."""
    if setting not in SETTINGS:
        raise UserError(f"server.mps: expected one of {', '.join(SETTINGS)}, found {setting!r}")
    if setting == "off":
        return MpsChoice(False, "server.mps = 'off'")
    if gpus == 0:
        if setting == "on":
            raise UserError("server.mps = 'on' needs the model on a GPU: this config variant runs on the CPU")
        return MpsChoice(False, "the model runs on the CPU")
    if control is None:
        if setting == "on":
            raise UserError(f"server.mps = 'on' needs {CONTROL} on PATH (it comes with the NVIDIA driver's utilities)")
        return MpsChoice(False, f"{CONTROL} not found")
    return MpsChoice(True, f"one MPS daemon for the server's {gpus} GPU{'s' if gpus != 1 else ''}")


# GPU memory one more ViT-B/32 instance holds with its CUDA graphs (batch buckets 1..128)
INSTANCE_GIB = 1.7
MEMORY_SHARE = 0.5  # of the smallest GPU, at most, for the instances: room for the batches' work
CORES_PER_INSTANCE = 2  # each instance's stub copies inputs on 2 threads (the config's cpu_threads)


def instances_under_mps(authored: int, wanted: int | None, gpu_gib: float | None, gpus: int, cores: int) -> int:
    """Instances per GPU when the server runs under MPS. ``authored``: the config's count (the
    best without MPS); ``wanted``: the config's ``mps_instances_per_gpu`` parameter (the best
    under MPS, measured), None when it has none; ``gpu_gib``: the smallest GPU's memory;
    ``gpus``, ``cores``: the GPUs the model uses and the host's cores. Never below the authored
    count, never more than half the GPU's memory holds or than the host has cores for."""
    if wanted is None or wanted <= authored or gpu_gib is None or gpus < 1:
        return authored
    fits = min(int(gpu_gib * MEMORY_SHARE / INSTANCE_GIB), cores // (CORES_PER_INSTANCE * gpus))
    return max(authored, min(wanted, fits))


def prepare_folder(folder: Path) -> dict[str, str]:
    """Make the daemon's pipe and log folders; the environment that makes a process the
    daemon's, or its client."""
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(folder / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(folder / "log")}
    for path in env.values():
        os.makedirs(path, exist_ok=True)
    return env


def control_ready(folder: Path) -> bool:
    """The daemon listens: its control pipe exists."""
    return (folder / "pipe" / "control").exists()


def log_tail(folder: Path, lines: int = 5) -> str:
    """The daemon's own log lines, for an error message."""
    out = []
    for name in ("control.log", "server.log"):
        path = folder / "log" / name
        if path.exists():
            out += [f"{name}: {line}" for line in path.read_text(errors="replace").splitlines()[-lines:]]
    return "\n".join(out)


READY_S = 10.0  # the control daemon makes its pipe within milliseconds; a slow box gets room
QUIT_S = 5.0


class MpsDaemon:
    """The control daemon, run in the foreground as a child of the server's guard (so in its
    process group: a group kill ends it and the MPS server it starts)."""

    def __init__(self, control: str, folder: Path) -> None:
        self.control, self.folder = control, folder
        # a pipe left by an earlier daemon in this folder (the server restarted on new ports)
        # would read as ready before this one listens
        shutil.rmtree(folder / "pipe", ignore_errors=True)
        self.env = {**os.environ, **prepare_folder(folder)}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, preexec: Callable[[], None] | None = None) -> str | None:
        """Start and wait for the control pipe; None, or why it did not start."""
        try:
            self.proc = subprocess.Popen([self.control, "-f"], env=self.env, stdin=subprocess.DEVNULL,  # noqa: PLW1509
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=preexec)
        except OSError as exc:
            return f"{self.control}: {exc.strerror or exc}"
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"{CONTROL} exited with code {self.proc.returncode}" + _tail(self.folder)
            if control_ready(self.folder):
                return None
            time.sleep(0.02)
        return f"{CONTROL} made no control pipe in {READY_S:.0f} s" + _tail(self.folder)

    def pids(self) -> set[int]:
        """The daemon and the MPS server it started, in our process group: spared by the first
        group kill, so that they can be told to quit once their clients are gone. Told by name:
        whether the server is the daemon's child or was handed to the guard as an orphan is the
        driver's business."""
        if self.proc is None or self.proc.poll() is not None:
            return set()
        return {self.proc.pid, *mps_processes(os.getpgid(0), self.proc.pid)}

    def quit(self) -> None:
        """Ask the daemon to quit (it stops its MPS server first) and wait a little for it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            subprocess.run([self.control], input=b"quit\n", env=self.env, timeout=QUIT_S, check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.proc.wait(QUIT_S)
        except (OSError, subprocess.TimeoutExpired):
            pass  # the group kill that follows ends it


def _tail(folder: Path) -> str:
    tail = log_tail(folder, 3)
    return f" ({tail.replace(chr(10), '; ')})" if tail else ""


def mps_processes(pgid: int, daemon: int) -> list[int]:
    """Live processes of group ``pgid`` named nvidia-cuda-mps-* (control daemon, server), or
    whose parent is the ``daemon``."""
    return [p.pid for p in live_processes()
            if p.pgrp == pgid and (p.name.startswith(b"nvidia-cuda-mps") or p.ppid == daemon)]
