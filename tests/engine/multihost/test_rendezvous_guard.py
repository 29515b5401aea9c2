"""The rendezvous against the real store on loopback: the head's store listens only on the
address given, every value is sealed with the group's token, and what is not a group host's
(no seal, another token, a rank the head does not know, another rank's key) is refused and named."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest

from engine.errors import UserError
from engine.multihost.group import HostGroup, Refused, opened, sealed
from engine.multihost.store import StoreClient
from tui.commands.exits import shown

TOKEN = "the-groups-token"
TIMEOUT_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def formed(port: int, member_token: str = TOKEN) -> tuple[dict[str, Any], dict[str, Any]]:
    """A head (rank 0) and a member (rank 1) joining at 127.0.0.1:port; each side's outcome."""
    address = f"127.0.0.1:{port}"
    head_thread, head = in_thread(lambda: HostGroup.join(address, 2, 0, TIMEOUT_S, "plan", TOKEN))
    member_thread, member = in_thread(lambda: HostGroup.join(address, 2, 1, TIMEOUT_S, "plan", member_token))
    head_thread.join(3 * TIMEOUT_S)
    member_thread.join(3 * TIMEOUT_S)
    return head, member


def raw_client(port: int) -> StoreClient:
    """A client of the store that is no host of the group: it reads and writes what it likes."""
    return StoreClient("127.0.0.1", port, TIMEOUT_S)


@pytest.fixture(scope="module")
def group() -> tuple[HostGroup, HostGroup, int]:
    port = free_port()
    head, member = formed(port)
    assert "error" not in head and "error" not in member, (head, member)
    return head["value"], member["value"], port


def test_the_store_listens_only_on_the_address_given(group: tuple[HostGroup, HostGroup, int]) -> None:
    _head, _member, port = group
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    with pytest.raises(ConnectionRefusedError):  # another address of this box (all of 127/8 is loopback)
        socket.create_connection(("127.0.0.2", port), timeout=2).close()


def test_members_values_reach_the_head_sealed(group: tuple[HostGroup, HostGroup, int]) -> None:
    head, member, port = group
    member.set("lvl/0/1", {"requests": 5})
    assert head.get("lvl/0/1", sender=1) == {"requests": 5} and head.has("lvl/0/1")
    raw = raw_client(port).get("lvl/0/1").decode()
    assert TOKEN not in raw and '"mac"' in raw  # the token itself never goes into the store


@pytest.mark.parametrize(("write", "words"), [
    (lambda key: '{"requests": 9}', "a value without the group's seal: refused"),
    (lambda key: sealed("another-token", key, 1, {"requests": 9}),
     "a value not signed with this group's rendezvous token (said to be from rank 1): refused"),
    (lambda key: sealed(TOKEN, key, 7, {"requests": 9}),
     "written by rank 7, a host this group does not know (ranks 0 to 1): refused"),
])
def test_a_value_not_a_group_hosts_is_refused_and_named(group: tuple[HostGroup, HostGroup, int],
                                                        write: Callable[[str], str], words: str) -> None:
    head, _member, port = group
    key = f"win/0/1/{len(words)}"
    raw_client(port).set(key, write(key))
    with pytest.raises(Refused) as refused:
        head.get(key, sender=1)
    line = str(refused.value)
    assert line.startswith(f"store key {key}: {words}") and "\n" not in line
    assert not head.has(key) and not head.has(key)  # read as absent, and named once
    assert head.refusals.count(line) == 1


def test_a_key_written_by_another_rank_is_refused(group: tuple[HostGroup, HostGroup, int]) -> None:
    head, member, _port = group
    member.set("lvl/0/2", {"requests": 1})  # rank 1 writing what would be rank 2's key
    with pytest.raises(Refused, match="store key lvl/0/2: written by rank 1, not by rank 2 whose key it is"):
        head.get("lvl/0/2", sender=2)


def test_a_member_with_another_token_is_refused_on_both_sides() -> None:
    head, member = formed(free_port(), member_token="a-wrong-token")
    assert isinstance(head.get("error"), UserError), head
    assert "store key hello/1: a value not signed with this group's rendezvous token" in str(head["error"])
    assert isinstance(member.get("error"), UserError), member
    assert "the head's word is not signed with this host's token" in str(member["error"])
    assert "\n" not in str(head["error"]) + str(member["error"])
    # as the screen shows them, credentials masked: no word of the advice taken for a token
    for error in (head["error"], member["error"]):
        assert shown(error) == str(error), shown(error)
    assert shown(member["error"]).endswith("give the token that head printed")


def test_a_member_without_a_token_is_one_line() -> None:
    with pytest.raises(UserError, match="--rank 1: give the head's rendezvous token"):
        HostGroup.join(f"127.0.0.1:{free_port()}", 2, 1, 1.0, "plan", "")


def test_sealed_values_round_trip() -> None:
    assert opened(TOKEN, "k", sealed(TOKEN, "k", 1, [1, 2]), range(2)) == (1, [1, 2])
    with pytest.raises(Refused):  # a sealed value moved to another key
        opened(TOKEN, "other", sealed(TOKEN, "k", 1, [1, 2]), range(2))


def test_the_head_reads_a_forged_window_as_missing_and_names_it(group: tuple[HostGroup, HostGroup, int]) -> None:
    """The head's merge gathers each host's window: a forged one is left out, and said once."""
    import asyncio

    from engine.analysis.percentiles import latency_stats
    from engine.events import Event, WindowResult
    from engine.multihost.head import HeadSweep
    from engine.profiles import Load

    head, member, port = group
    said: list[Event] = []
    sweep = HeadSweep(head, Load(concurrency=[4]), said.append)
    window = WindowResult(ts=1.0, level=2, index=0, warmup=False, t_start=0.0, t_end=1.0, requests=3, errors=0,
                          throughput_rps=3.0, throughput_ips=3.0, latency=latency_stats([1_000_000, 2_000_000]))
    member.set("win/5/1/0", window.to_dict())
    got = asyncio.run(sweep.gather({1: "win/5/1/0"}, 1.0))
    assert isinstance(got[1], WindowResult) and got[1].requests == 3
    raw_client(port).set("win/5/1/1", sealed("another-token", "win/5/1/1", 1, window.to_dict()))
    assert asyncio.run(sweep.gather({1: "win/5/1/1"}, 1.0)) == {}
    warnings = [e.message for e in said if "win/5/1/1" in getattr(e, "message", "")]
    assert warnings == ["store key win/5/1/1: a value not signed with this group's rendezvous token (said to be "
                        "from rank 1): refused"]


class _StoreThatClosesOnTheAcknowledgement:
    """A head's store holding a refusal, gone the moment the member says it heard it (the head
    exits then): the member's set of refused-heard never gets its answer."""

    def __init__(self, refusal: bytes) -> None:
        self.values = {"refused": refusal}

    def wait(self, keys: list[str], timeout_s: float | None = None) -> None:
        raise TimeoutError("not set")

    def check(self, keys: list[str]) -> bool:
        return all(k in self.values for k in keys)

    def get(self, key: str) -> bytes:
        return self.values[key]

    def set(self, key: str, value: bytes) -> None:
        if key.startswith("refused-heard/"):
            from engine.multihost.store import StoreError

            raise StoreError("the store at 127.0.0.1:1 closed the connection")
        self.values[key] = value


def test_a_refused_member_says_the_heads_reason_though_the_head_closed_as_it_heard() -> None:
    refusal = sealed(TOKEN, "refused", 0, "host 1 runs another plan")
    store = _StoreThatClosesOnTheAcknowledgement(refusal.encode() if isinstance(refusal, str) else refusal)
    member = HostGroup(store, ("127.0.0.1", 1), 2, 1, TIMEOUT_S, token=TOKEN)  # type: ignore[arg-type]
    with pytest.raises(UserError) as caught:
        member._answer_clock()
    assert str(caught.value) == "the head refused this host: host 1 runs another plan"
