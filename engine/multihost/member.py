"""A host of a group other than the head: its share of every level, started when the head says,
each window and level result sent to the head (on the head's clock), and a plain line per window
on stdout. It reads no server statistics (the head does)."""

from __future__ import annotations

import asyncio
import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from engine.errors import RunFailed
from engine.events import Error, Event, LevelResult, LevelStarted, Warning, WindowResult
from engine.load.sweep import HostShare, run_sweep
from engine.modes import mode_of
from engine.multihost.group import HostGroup, first_line
from engine.multihost.host_plan import host_load
from engine.profiles import Profile
from engine.transport_table import AUTO, REMOTE, auto_transport
from engine.triton.api import TritonApi
from engine.triton.target_setup import open_target

GATE_POLL_S = 1.0  # how often a host waiting for a level's start looks for the head's end


class _Sender:
    """Store writes off the event loop, on their own connection, in order."""

    def __init__(self, group: HostGroup) -> None:
        self.group = group.copy()
        self.failure = ""  # why the head stopped taking what this host sends
        self.queue: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="gpuscale-host-sender", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            if self.failure:
                continue
            try:
                self.group.set(*item)
            except (RuntimeError, OSError) as exc:  # the head (the store) is gone
                self.failure = first_line(exc)

    def send(self, key: str, value: Any) -> None:
        self.queue.put((key, value))

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()


class MemberSweep:
    def __init__(self, group: HostGroup, profile: Profile, say: Callable[[str], None], stop: asyncio.Event) -> None:
        self.group, self.profile, self.say, self.stop = group, profile, say, stop
        self.levels = mode_of(profile.load.mode).levels(profile.load)
        self.index = -1
        self.sender = _Sender(group)
        self.head_ended = False

    def on_head_clock(self, t: float) -> float:
        return t - self.group.offset_ns / 1e9

    def publish(self, event: Event) -> None:
        rank = self.group.rank
        if isinstance(event, LevelStarted):
            self.index = event.index
        elif isinstance(event, WindowResult):
            window = msgspec.structs.replace(event, t_start=self.on_head_clock(event.t_start),
                                         t_end=self.on_head_clock(event.t_end))
            self.sender.send(f"win/{self.index}/{rank}/{event.index}", window.to_dict())
            if not event.warmup:
                self.say(f"host {rank}: level {self.levels[self.index]:g} window {event.index}: {event.requests} "
                         f"requests, {event.throughput_rps:.3f} req/s over {event.t_end - event.t_start:.3f} s")
        elif isinstance(event, LevelResult):
            self.sender.send(f"lvl/{self.index}/{rank}", event.to_dict())
            self.say(f"host {rank}: level {self.levels[self.index]:g} {event.status}: {event.requests} requests")
        elif isinstance(event, (Warning, Error)):
            self.say(f"host {rank}: {event.kind}: {event.message}")

    async def start_at(self, index: int) -> int:
        """Ready for level ``index``; the instant the head gives for it, on this host's clock."""
        try:
            return await self._start_at(index)
        except (RuntimeError, OSError) as exc:  # the head (the store) is gone
            host, port = self.group.address
            raise RunFailed(f"host {self.group.rank}: the head at {host}:{port} stopped answering "
                            f"({first_line(exc)})") from None

    async def _start_at(self, index: int) -> int:
        group, loop = self.group, asyncio.get_running_loop()
        self.sender.send(f"ready/{index}/{group.rank}", 1)
        while True:
            missing = await loop.run_in_executor(None, group.wait_for, [f"start/{index}"], GATE_POLL_S)
            if not missing:
                return group.local_monotonic(int(await loop.run_in_executor(None, group.get, f"start/{index}", None, 0)))
            if await loop.run_in_executor(None, group.has, "end"):
                self.head_ended = True
                self.stop.set()  # the head's sweep is over: this level does not run
                return time.monotonic_ns()

    async def run(self) -> int:
        """The exit code: 0 when every level ran to its end."""
        stop = self.stop
        results: list[LevelResult] = []
        try:
            target, info = await open_target(self.profile, None, self.publish)
            load = host_load(self.profile.load, self.group.hosts, self.group.rank)
            if load.transport == AUTO:  # as the head picks it: several hosts send over the wire
                pick = auto_transport(REMOTE, hosts=self.group.hosts)
                load = dataclasses.replace(load, transport=pick.name)
                self.say(f"host {self.group.rank}: {pick.line}")
            results = await run_sweep(TritonApi(target, info, rank=self.group.rank), load, self.publish, stop,
                                      share=HostShare(start_at=self.start_at, server_stats=False))
        finally:
            self.sender.close()
        if self.sender.failure:
            raise RunFailed(f"host {self.group.rank}: the head stopped taking this host's windows "
                            f"({self.sender.failure})")
        complete = len(results) == len(self.levels) and all(r.status != "interrupted" for r in results)
        if self.head_ended:
            self.say(f"host {self.group.rank}: the head ended the sweep after {len(results)} levels")
        return 0 if complete else 1
