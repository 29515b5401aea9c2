"""Where one model instance's time goes, batch by batch (a diagnosis aid, off by default).

Triton's statistics give queue and compute time per request, summed over every instance of a
model. To tell why instances on one GPU do less work than those on another (cuda_shm with the
inputs on one GPU), each instance needs its own account: the time between two executes (Triton and the Python-backend stub: the request's
message, opening CUDA IPC handles, releasing the previous batch) and each section inside one.

Enabled by GPUSCALE_VIT_TIMING=<directory>: each instance rewrites
``<directory>/<model>-<device>-<pid>.json`` at most every WRITE_EVERY_S with its running totals,
so a reader can difference two snapshots around a run. Imports only the standard library.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

WRITE_EVERY_S = 0.25
# a longer pause between two executes is the load stopping (between a bench's runs), not a cost
# of serving: counted apart, so that it does not swell the next run's mean gap
IDLE_GAP_S = 0.5
TIMING_ENV = "GPUSCALE_VIT_TIMING"


class ExecuteClock:
    """Running totals, in ns, of the sections of execute() and of the gaps between executes."""

    def __init__(self, path: Path, device: str, clock=time.perf_counter_ns) -> None:
        self.path, self.device, self._clock = path, device, clock
        self.totals: dict[str, int] = {"gap": 0}
        self.counts = {"batches": 0, "requests": 0, "images": 0, "inputs_elsewhere": 0, "idle_gaps": 0}
        self._last_end: int | None = None
        self._mark = 0
        self._written_at: int | None = None  # the first batch is written at once

    @classmethod
    def from_env(cls, model: str, device: str) -> ExecuteClock | None:
        directory = os.environ.get(TIMING_ENV)
        if not directory:
            return None
        Path(directory).mkdir(parents=True, exist_ok=True)
        name = f"{model}-{device.replace(':', '')}-{os.getpid()}.json"
        return cls(Path(directory) / name, device)

    def begin(self) -> None:
        now = self._clock()
        if self._last_end is not None:  # the first execute has no gap before it
            gap = now - self._last_end
            if gap < IDLE_GAP_S * 1e9:
                self.totals["gap"] += gap
            else:
                self.counts["idle_gaps"] += 1
        self._mark = now

    def section(self, name: str) -> None:
        """Close the section that ran since the last mark (or begin) under ``name``."""
        now = self._clock()
        self.totals[name] = self.totals.get(name, 0) + now - self._mark
        self._mark = now

    def end(self, requests: int, images: int, inputs_elsewhere: int) -> None:
        self.section("responses")
        self._last_end = self._mark
        self.counts["batches"] += 1
        self.counts["requests"] += requests
        self.counts["images"] += images
        self.counts["inputs_elsewhere"] += inputs_elsewhere
        if self._written_at is None or self._mark - self._written_at >= WRITE_EVERY_S * 1e9:
            self.write()

    def snapshot(self) -> dict:
        return {"device": self.device, "pid": os.getpid(), "ppid": os.getppid(), "at_ns": self._mark,
                "totals_ns": dict(self.totals), **self.counts}

    def write(self) -> None:
        self._written_at = self._mark
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.snapshot()))
        temporary.replace(self.path)  # a reader never sees half a file


def per_batch_us(before: dict | None, after: dict) -> dict[str, float]:
    """Mean µs per batch of each section between two snapshots of one instance (``before``
    None: since it started), with the batch, request and image counts of the interval."""
    base_totals = before["totals_ns"] if before else {}
    batches = after["batches"] - (before["batches"] if before else 0)
    out: dict[str, float] = {k: after[k] - (before[k] if before else 0)
                             for k in ("batches", "requests", "images", "inputs_elsewhere", "idle_gaps")}
    for name, total in after["totals_ns"].items():
        # gaps: one fewer than batches per idle pause (the batch after it has no gap counted)
        count = batches - out["idle_gaps"] if name == "gap" else batches
        out[f"{name}_us"] = (total - base_totals.get(name, 0)) / count / 1e3 if count > 0 else 0.0
    return out
