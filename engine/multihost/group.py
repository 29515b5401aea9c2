"""The client hosts of one session, joined through torch.distributed's TCPStore (the store
torchrun's rendezvous uses): rank 0, the head, holds the store; every other host connects to it.

Everything the hosts say to each other is a key of that store, JSON valued: a host's hello, the
head's clock exchanges with each host (engine/analysis/clock_offset.py), each level's start (every
host ready, then one instant on the head's clock), each host's windows and level results. Every
wait is bounded: a head that is not there, or a host that never joins, is one line (UserError)."""

from __future__ import annotations

import datetime
import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.analysis.clock_offset import ClockOffset, Exchange, clock_offset
from engine.errors import UserError, require_extra

CLOCK_EXCHANGES = 16  # per host; the one with the least round trip stands
REFUSAL_WAIT_S = 5.0  # the head waits this long for the hosts it refuses to hear it
START_LEAD_NS = 300_000_000  # a level's start instant is this far ahead of the head's decision


def parse_address(text: str) -> tuple[str, int]:
    """"HOST:PORT" (an IPv6 host in brackets); UserError otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--rendezvous {text!r}: expected HOST:PORT, e.g. head.example:29500")
    return host, int(port)


@dataclass
class Member:
    """A host of the group as the head knows it."""

    rank: int
    name: str
    fingerprint: str
    clock: ClockOffset | None = None
    gone: str = ""  # why it was left out ("" while it takes part)


@dataclass
class HostGroup:
    """This host's place in the group and its door to the store."""

    store: Any  # torch.distributed.TCPStore
    address: tuple[str, int]
    hosts: int
    rank: int
    timeout_s: float
    members: list[Member] = field(default_factory=list)  # the head's view of every host, itself first
    offset_ns: float = 0.0  # this host's clock minus the head's (a member's, told by the head)
    swept: bool = False  # the group ran its sweep: the hosts' keys are spent, a second one needs a new group

    @property
    def head(self) -> bool:
        return self.rank == 0

    # -- joining

    @classmethod
    def join(cls, address: str, hosts: int, rank: int, timeout_s: float, fingerprint: str) -> HostGroup:
        """Join (rank 0: open) the group at ``address``; the head waits up to ``timeout_s`` for
        every host's hello and measures each one's clock. UserError, one line, on any failure."""
        if hosts < 2:
            raise UserError(f"--hosts {hosts}: a group needs at least 2 hosts")
        if not 0 <= rank < hosts:
            raise UserError(f"--rank {rank}: expected 0 to {hosts - 1} for --hosts {hosts}")
        require_extra("probe", "load from several hosts (torch.distributed's TCPStore)")
        host, port = parse_address(address)
        try:
            socket.getaddrinfo(host, port)
        except OSError as exc:
            raise UserError(f"--rendezvous {address}: cannot resolve {host}: {exc.strerror or exc}") from None
        store = _open_store(host, port, hosts, rank, timeout_s, address)
        group = cls(store, (host, port), hosts, rank, timeout_s)
        name = socket.gethostname()
        if group.head:
            group.members = [Member(0, name, fingerprint, ClockOffset(0.0, 0, 0))]
            group._greet(fingerprint)
        else:
            group.set(f"hello/{rank}", {"name": name, "fingerprint": fingerprint})
            group._answer_clock()
        return group

    def _greet(self, fingerprint: str) -> None:
        keys = [f"hello/{r}" for r in range(1, self.hosts)]
        missing = self.wait_for(keys, self.timeout_s)
        if missing:
            ranks = ", ".join(k.split("/")[1] for k in missing)
            raise UserError(f"--rendezvous {self.address[0]}:{self.address[1]}: host(s) of rank {ranks} did not join "
                            f"within {self.timeout_s:g} s")
        for r in range(1, self.hosts):
            hello = self.get(f"hello/{r}")
            if hello["fingerprint"] != fingerprint:
                self.set("refused", f"host {r} runs another plan")
                # every host hears it before the store closes with this process
                self.wait_for([f"refused-heard/{h}" for h in range(1, self.hosts)], REFUSAL_WAIT_S)
                raise UserError(f"host {r} ({hello['name']}) runs another plan than the head ({hello['fingerprint']} "
                                f"against {fingerprint}): give every host the same profile and --set flags")
            self.members.append(Member(r, str(hello["name"]), hello["fingerprint"]))
        for member in self.members[1:]:
            member.clock = self._measure_clock(member.rank)
            self.set(f"offset/{member.rank}", member.clock.offset_ns)

    def _measure_clock(self, rank: int) -> ClockOffset:
        exchanges = []
        for i in range(CLOCK_EXCHANGES):
            sent = time.time_ns()
            self.store.set(f"ping/{rank}/{i}", b"")
            self.store.wait([f"pong/{rank}/{i}"], datetime.timedelta(seconds=self.timeout_s))
            received = time.time_ns()
            exchanges.append(Exchange(sent, int(self.store.get(f"pong/{rank}/{i}")), received))
        return clock_offset(exchanges)

    def _answer_clock(self) -> None:
        try:
            for i in range(CLOCK_EXCHANGES):
                self._wait_unless_refused(f"ping/{self.rank}/{i}")
                self.store.set(f"pong/{self.rank}/{i}", str(time.time_ns()))
            self._wait_unless_refused(f"offset/{self.rank}")
            self.offset_ns = float(self.get(f"offset/{self.rank}"))
        except (RuntimeError, TimeoutError) as exc:
            raise UserError(f"--rendezvous {self.address[0]}:{self.address[1]}: the head did not measure this host's "
                            f"clock within {self.timeout_s:g} s ({first_line(exc)})") from None

    def _wait_unless_refused(self, key: str) -> None:
        """Wait for ``key`` (at most the group's timeout), in slices: a refusal ends the wait."""
        deadline = time.monotonic() + self.timeout_s
        while self.wait_for([key], min(1.0, max(0.0, deadline - time.monotonic()))):
            if self.has("refused"):
                why = self.get("refused")
                self.set(f"refused-heard/{self.rank}", 1)
                raise UserError(f"the head refused this host: {why}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{key} not set within {self.timeout_s:g} s")

    # -- keys

    def set(self, key: str, value: Any) -> None:
        self.store.set(key, json.dumps(value))

    def get(self, key: str, timeout_s: float | None = None) -> Any:
        if timeout_s is not None and self.wait_for([key], timeout_s):
            raise TimeoutError(f"{key} not set within {timeout_s:g} s")
        return json.loads(self.store.get(key))

    def has(self, key: str) -> bool:
        return bool(self.store.check([key]))

    def wait_for(self, keys: Sequence[str], timeout_s: float) -> list[str]:
        """Wait until every key is set, at most ``timeout_s``; the keys still missing."""
        if not keys:
            return []
        try:
            self.store.wait(list(keys), datetime.timedelta(seconds=max(timeout_s, 0.001)))
            return []
        except (RuntimeError, TimeoutError):  # torch raises DistStoreError (a RuntimeError) on timeout
            return [k for k in keys if not self.store.check([k])]

    def copy(self) -> HostGroup:
        """Another connection to the same store, for another thread (a store client is one socket)."""
        import torch.distributed as dist

        host, port = self.address
        store = dist.TCPStore(host, port, self.hosts, is_master=False,
                              timeout=datetime.timedelta(seconds=self.timeout_s))
        return HostGroup(store, self.address, self.hosts, self.rank, self.timeout_s, self.members, self.offset_ns)

    # -- clocks

    def local_monotonic(self, head_wall_ns: int) -> int:
        """An instant given on the head's wall clock, on this host's CLOCK_MONOTONIC."""
        local_wall = head_wall_ns + self.offset_ns
        return int(local_wall - (time.time_ns() - time.monotonic_ns()))

    def live(self) -> list[Member]:
        return [m for m in self.members[1:] if not m.gone]


def first_line(exc: BaseException) -> str:
    """The first line of an error's text (torch's carry a C++ stack)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _open_store(host: str, port: int, hosts: int, rank: int, timeout_s: float, address: str) -> Any:
    # c10d logs every retry and timeout with a C++ stack to stderr; the errors here are ours, one line
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_s)
    try:
        if rank == 0:
            return dist.TCPStore(host, port, hosts, is_master=True, timeout=timeout, wait_for_workers=False)
        return dist.TCPStore(host, port, hosts, is_master=False, timeout=timeout)
    except (RuntimeError, OSError, TimeoutError) as exc:
        if rank == 0:
            raise UserError(f"--rendezvous {address}: cannot hold the store there ({first_line(exc)})") from None
        raise UserError(f"--rendezvous {address}: no head answered within {timeout_s:g} s "
                        f"({first_line(exc)})") from None
