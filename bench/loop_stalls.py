"""What holds an asyncio event loop: the loop stamps a heartbeat every few milliseconds; a
watching thread that finds the stamp older than a threshold samples the loop thread's stack until
the loop moves on. Each stall is kept with its length and the stacks sampled during it, so that
the code that blocked it (one long handler, a big redraw, a screen's first layout) can be named.

A sampling watch, not a tracer: a stall shorter than the threshold is not seen, and a stack is
where the loop thread was, which includes waiting for the GIL held by another thread.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from types import FrameType

KEPT = ("/tui/", "/textual/", "/rich/", "/engine/")  # the frames a stall is told by


@dataclass
class Stall:
    start: float  # perf_counter of the last heartbeat before it
    length_s: float = 0.0
    stacks: list[tuple[str, ...]] = field(default_factory=list)  # outermost first, KEPT frames only
    leaves: list[str] = field(default_factory=list)  # each sample's innermost frame, whatever its file
    others: list[str] = field(default_factory=list)  # each sample's other threads' innermost frames

    def summary(self, depth: int = 6) -> str:
        """The frames most samples share (outermost first, at most ``depth``), then the commonest leaf."""
        if not self.stacks:
            return "(no sample)"
        common: list[str] = []
        for frames in zip(*self.stacks, strict=False):
            if len(set(frames)) != 1:
                break
            common.append(frames[0])
        after = Counter(s[len(common)] for s in self.stacks if len(s) > len(common)).most_common(2)
        leaf, n = Counter(self.leaves).most_common(1)[0]
        text = (f"{' > '.join(common[-depth:]) or '(no common frame)'} | then {', '.join(f'{f} ({c})' for f, c in after) or '-'}"
                f" | leaf {leaf} ({n} of {len(self.stacks)} samples)")
        if not any(self.stacks):  # the loop thread was in none of ours: who else ran
            text += f" | other threads: {Counter(self.others).most_common(2)}"
        return text


def _frames(frame: FrameType | None) -> tuple[str, ...]:
    out: list[str] = []
    while frame is not None:
        path = frame.f_code.co_filename
        if any(k in path for k in KEPT):
            short = path.rsplit("/", 2)
            out.append(f"{short[-2]}/{short[-1].removesuffix('.py')}:{frame.f_code.co_name}")
        frame = frame.f_back
    return tuple(reversed(out))


def _where(frame: FrameType | None) -> str:
    if frame is None:
        return "?"
    short = "/".join(frame.f_code.co_filename.rsplit("/", 2)[-2:]).removesuffix(".py")
    return f"{short}:{frame.f_code.co_name}"


class StallWatch:
    def __init__(self, threshold_s: float = 0.05, tick_s: float = 0.005) -> None:
        self.threshold_s = threshold_s
        self.tick_s = tick_s
        self.stalls: list[Stall] = []
        self.enabled = True  # off: stalls are not kept (untimed work between measured parts)
        self._beat = time.perf_counter()
        self._stop = threading.Event()
        self._loop_thread = 0
        self._handle: asyncio.TimerHandle | None = None
        self._thread: threading.Thread | None = None
        self.collections: list[tuple[int, float]] = []  # (generation, seconds) of each garbage collection
        self._gc_start = 0.0

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self.enabled:
            self.collections.append((info["generation"], time.perf_counter() - self._gc_start))

    def start(self) -> None:
        """From the loop's own thread."""
        loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

        def beat() -> None:
            self._beat = time.perf_counter()
            self._handle = loop.call_later(self.tick_s, beat)

        beat()
        gc.callbacks.append(self._on_gc)
        self._thread = threading.Thread(target=self._watch, name="StallWatch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        current: Stall | None = None
        while not self._stop.wait(self.tick_s):
            beat = self._beat
            age = time.perf_counter() - beat
            if current is not None and current.start != beat:  # the loop moved on
                current = None
            if age < self.threshold_s or not self.enabled:
                continue
            if current is None:
                current = Stall(beat)
                self.stalls.append(current)
            current.length_s = age
            frames = sys._current_frames()
            loop_frame = frames.get(self._loop_thread)
            current.stacks.append(_frames(loop_frame))
            current.leaves.append(_where(loop_frame))
            current.others.append("; ".join(_where(f) for t, f in frames.items()
                                            if t not in (self._loop_thread, threading.get_ident())))

    def report(self, top: int = 12) -> str:
        return f"{self._stalls_report(top)}\n{self._gc_report()}"

    def _gc_report(self) -> str:
        """Garbage collections (any thread's) hold the GIL throughout: a loop stall with few samples."""
        parts = []
        for gen in (0, 1, 2):
            times = [t for g, t in self.collections if g == gen]
            if times:
                parts.append(f"gen {gen}: {len(times)}, longest {max(times) * 1000:.0f} ms, total {sum(times) * 1000:.0f} ms")
        return f"garbage collections: {'; '.join(parts) or 'none'}"

    def _stalls_report(self, top: int) -> str:
        if not self.stalls:
            return f"loop stalls over {self.threshold_s * 1000:.0f} ms: none"
        lengths = sorted((s.length_s for s in self.stalls), reverse=True)
        lines = [f"loop stalls over {self.threshold_s * 1000:.0f} ms: {len(self.stalls)}, longest "
                 f"{lengths[0] * 1000:.0f} ms, total {sum(lengths) * 1000:.0f} ms; the longest {min(top, len(lengths))}:"]
        for stall in sorted(self.stalls, key=lambda s: -s.length_s)[:top]:
            lines.append(f"  {stall.length_s * 1000:5.0f} ms  {stall.summary()}")
        return "\n".join(lines)
