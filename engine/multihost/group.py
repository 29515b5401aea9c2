"""The client hosts of one session, joined through a key-value store (engine/multihost/store.py):
rank 0, the head, holds the store; every other host connects to it.

Everything the hosts say to each other is a key of that store, JSON valued: a host's hello, the
head's clock exchanges with each host (engine/analysis/clock_offset.py), each level's start (every
host ready, then one instant on the head's clock), each host's windows and level results. Every
wait is bounded: a head that is not there, or a host that never joins, is one line (UserError).

The store has no authentication of its own: whoever reaches its port can read and overwrite any
key. The head's store listens only on the address given, and every value carries an HMAC under
the group's token (the head makes it and prints it; members present it) and its writer's rank: a
value without a valid MAC, or written by a rank the head did not admit, is refused and named,
never read as a host's figures."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.analysis.clock_offset import ClockOffset, Exchange, clock_offset
from engine.errors import UserError
from engine.multihost.store import StoreClient, StoreError, serve

CLOCK_EXCHANGES = 16  # per host; the one with the least round trip stands
REFUSAL_WAIT_S = 5.0  # the head waits this long for the hosts it refuses to hear it
START_LEAD_NS = 300_000_000  # a level's start instant is this far ahead of the head's decision
TOKEN_ENV = "GPUSCALE_RENDEZVOUS_TOKEN"


class Refused(UserError):
    """A store value not written by a host of this group: no valid MAC, or a rank not admitted."""


def new_token() -> str:
    return secrets.token_urlsafe(24)


def _mac(token: str, key: str, rank: int, body: str) -> str:
    return hmac.new(token.encode(), f"{key}\0{rank}\0{body}".encode(), hashlib.sha256).hexdigest()


def sealed(token: str, key: str, rank: int, value: Any) -> str:
    """``value`` as the store holds it: JSON, with its writer's rank and a MAC under the token."""
    body = json.dumps(value)
    return json.dumps({"rank": rank, "body": body, "mac": _mac(token, key, rank, body)})


def opened(token: str, key: str, raw: bytes | str, ranks: range) -> tuple[int, Any]:
    """(writer's rank, value) of a sealed value; Refused, naming the key, when it is not sealed
    under ``token`` or its writer is not one of ``ranks``."""
    try:
        outer = json.loads(raw)
        rank, body, mac = int(outer["rank"]), str(outer["body"]), str(outer["mac"])
    except (ValueError, TypeError, KeyError):
        raise Refused(f"store key {key}: a value without the group's seal: refused (written by something that is "
                      "not a host of this group)") from None
    if not hmac.compare_digest(mac, _mac(token, key, rank, body)):
        raise Refused(f"store key {key}: a value not signed with this group's rendezvous token (said to be from "
                      f"rank {rank}): refused")
    if rank not in ranks:
        raise Refused(f"store key {key}: written by rank {rank}, a host this group does not know "
                      f"(ranks 0 to {ranks[-1]}): refused")
    return rank, json.loads(body)


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

    store: StoreClient
    address: tuple[str, int]
    hosts: int
    rank: int
    timeout_s: float
    members: list[Member] = field(default_factory=list)  # the head's view of every host, itself first
    offset_ns: float = 0.0  # this host's clock minus the head's (a member's, told by the head)
    swept: bool = False  # the group ran its sweep: the hosts' keys are spent, a second one needs a new group
    token: str = field(default="", repr=False)  # signs every value (never recorded, never in the store)
    refusals: list[str] = field(default_factory=list)  # the refused values' lines, each once

    @property
    def head(self) -> bool:
        return self.rank == 0

    # -- joining

    @classmethod
    def join(cls, address: str, hosts: int, rank: int, timeout_s: float, fingerprint: str,
             token: str = "") -> HostGroup:
        """Join (rank 0: open) the group at ``address``; the head waits up to ``timeout_s`` for
        every host's hello and measures each one's clock. ``token``: the group's rendezvous token
        (a member must give the head's; the head makes one when none is given). UserError, one
        line, on any failure."""
        if hosts < 2:
            raise UserError(f"--hosts {hosts}: a group needs at least 2 hosts")
        if not 0 <= rank < hosts:
            raise UserError(f"--rank {rank}: expected 0 to {hosts - 1} for --hosts {hosts}")
        host, port = parse_address(address)
        try:
            socket.getaddrinfo(host, port)
        except OSError as exc:
            raise UserError(f"--rendezvous {address}: cannot resolve {host}: {exc.strerror or exc}") from None
        if rank > 0 and not token:
            raise UserError(f"--rank {rank}: give the head's rendezvous token (--rendezvous-token or {TOKEN_ENV}; "
                            "the head prints it when it starts)")
        store = _open_store(host, port, rank, timeout_s, address)
        group = cls(store, (host, port), hosts, rank, timeout_s, token=token or new_token())
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
            try:
                hello = self.get(f"hello/{r}", sender=r)
            except Refused as exc:  # a host without this group's token (or something else at the port)
                self.set("refused", f"host {r}'s hello is not signed with the head's token")
                self.wait_for([f"refused-heard/{h}" for h in range(1, self.hosts)], REFUSAL_WAIT_S)
                raise UserError(f"{exc}: give every host the token this head printed") from None
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
            self.set(f"ping/{rank}/{i}", i)
            self.store.wait([f"pong/{rank}/{i}"], self.timeout_s)
            received = time.time_ns()
            exchanges.append(Exchange(sent, int(self.get(f"pong/{rank}/{i}", sender=rank)), received))
        return clock_offset(exchanges)

    def _answer_clock(self) -> None:
        try:
            for i in range(CLOCK_EXCHANGES):
                self._wait_unless_refused(f"ping/{self.rank}/{i}")
                self.set(f"pong/{self.rank}/{i}", time.time_ns())
                # checked after the answer, not before: a round trip between would skew the offset
                self.get(f"ping/{self.rank}/{i}", sender=0)
            self._wait_unless_refused(f"offset/{self.rank}")
            self.offset_ns = float(self.get(f"offset/{self.rank}", sender=0))
        except (StoreError, TimeoutError) as exc:
            raise UserError(f"--rendezvous {self.address[0]}:{self.address[1]}: the head did not measure this host's "
                            f"clock within {self.timeout_s:g} s ({first_line(exc)})") from None

    def _wait_unless_refused(self, key: str) -> None:
        """Wait for ``key`` (at most the group's timeout), in slices: a refusal ends the wait."""
        deadline = time.monotonic() + self.timeout_s
        while self.wait_for([key], min(1.0, max(0.0, deadline - time.monotonic()))):
            if self.store.check(["refused"]):
                try:  # read before saying it was heard: the head then closes the store
                    why = f"the head refused this host: {self.get('refused', sender=0)}"
                except Refused:
                    # no "token:" before words: the screen's credential mask would take the next word for one
                    why = (f"--rendezvous {self.address[0]}:{self.address[1]}: the head's word is not signed with "
                           "this host's token; give the token that head printed")
                try:  # the head closes the store the moment it hears this: its answer may never come
                    self.set(f"refused-heard/{self.rank}", 1)
                except StoreError:
                    pass
                raise UserError(why)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{key} not set within {self.timeout_s:g} s")

    # -- keys

    def set(self, key: str, value: Any) -> None:
        self.store.set(key, sealed(self.token, key, self.rank, value))

    def get(self, key: str, timeout_s: float | None = None, sender: int | None = None) -> Any:
        """The value under ``key``, opened; Refused when it is not a group host's (or, with
        ``sender``, not that rank's)."""
        if timeout_s is not None and self.wait_for([key], timeout_s):
            raise TimeoutError(f"{key} not set within {timeout_s:g} s")
        rank, value = opened(self.token, key, self.store.get(key), range(self.hosts))
        if sender is not None and rank != sender:
            raise Refused(f"store key {key}: written by rank {rank}, not by rank {sender} whose key it is: refused")
        return value

    def has(self, key: str) -> bool:
        """Whether ``key`` holds a value of a host of this group; one that is not is refused,
        named once in ``refusals``, and reads as absent."""
        if not self.store.check([key]):
            return False
        try:
            opened(self.token, key, self.store.get(key), range(self.hosts))
        except Refused as exc:
            self.refuse(str(exc))
            return False
        return True

    def refuse(self, line: str) -> None:
        if line not in self.refusals:
            self.refusals.append(line)

    def wait_for(self, keys: Sequence[str], timeout_s: float) -> list[str]:
        """Wait until every key is set, at most ``timeout_s``; the keys still missing."""
        if not keys:
            return []
        try:
            self.store.wait(list(keys), max(timeout_s, 0.001))
            return []
        except (StoreError, TimeoutError):
            return [k for k in keys if not self.store.check([k])]

    def copy(self) -> HostGroup:
        """Another connection to the same store, for another thread (a store client is one socket)."""
        host, port = self.address
        store = StoreClient(host, port, self.timeout_s)
        return HostGroup(store, self.address, self.hosts, self.rank, self.timeout_s, self.members, self.offset_ns,
                         token=self.token, refusals=self.refusals)

    # -- clocks

    def local_monotonic(self, head_wall_ns: int) -> int:
        """An instant given on the head's wall clock, on this host's CLOCK_MONOTONIC."""
        local_wall = head_wall_ns + self.offset_ns
        return int(local_wall - (time.time_ns() - time.monotonic_ns()))

    def live(self) -> list[Member]:
        return [m for m in self.members[1:] if not m.gone]


def first_line(exc: BaseException) -> str:
    """The first line of an error's text."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _open_store(host: str, port: int, rank: int, timeout_s: float, address: str) -> StoreClient:
    try:
        if rank == 0:
            return serve(host, port, timeout_s)
        return StoreClient(host, port, timeout_s)
    except (StoreError, OSError) as exc:
        if rank == 0:
            raise UserError(f"--rendezvous {address}: cannot hold the store there ({first_line(exc)})") from None
        raise UserError(f"--rendezvous {address}: no head answered within {timeout_s:g} s "
                        f"({first_line(exc)})") from None
