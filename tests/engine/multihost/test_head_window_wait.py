"""The head's wait for the hosts' windows (engine/multihost/head.py's _LevelMerge.windows_or_ends):
a host whose level result is in sends no more windows and is not waited for past the next check;
a host whose window is there but refused reads as missing at once; a slow host's window is still
taken when it comes. Pure logic over a fake store (the real group is tests/engine/multihost/
test_hosts_server.py's): each gather is one slice of the wait, so the slices are counted."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.multihost.head import ENDED_CHECK_S, _LevelMerge


class _Store:
    def __init__(self, keys: set[str]) -> None:
        self.keys = keys

    def check(self, keys: list[str]) -> bool:
        return all(k in self.keys for k in keys)


class _Group:
    def __init__(self, keys: set[str], refused: set[str]) -> None:
        self.store, self.refused = _Store(keys), refused

    def has(self, key: str) -> bool:
        return key in self.store.keys and key not in self.refused


class _Inbox:
    def __init__(self, group: _Group) -> None:
        self.group = group

    async def call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


class _Head:
    """gather: the keys set and not refused; a window that ``arrives`` (rank -> slice number) is
    set from that slice on."""

    def __init__(self, keys: set[str], refused: frozenset[str] | set[str] = frozenset(), arrives: dict[str, int] | None = None) -> None:
        self.inbox = _Inbox(_Group(keys, set(refused)))
        self.arrives = arrives or {}
        self.slices: list[float] = []

    async def gather(self, keys: dict[int, str], timeout_s: float) -> dict[int, Any]:
        self.slices.append(timeout_s)
        for key, at in self.arrives.items():
            if len(self.slices) >= at:
                self.inbox.group.store.keys.add(key)
        group = self.inbox.group
        return {rank: f"window of {rank}" for rank, key in keys.items() if group.has(key)}


def _merge(head: _Head) -> _LevelMerge:
    merge = object.__new__(_LevelMerge)  # only its index and head are read here
    merge.head, merge.index = head, 0  # type: ignore[assignment]
    return merge


def test_a_host_whose_level_ended_is_not_waited_for() -> None:
    head = _Head({"win/0/1/3", "lvl/0/2"})  # host 1 sent its window; host 2's level ended
    got = asyncio.run(_merge(head).windows_or_ends({1: "win/0/1/3", 2: "win/0/2/3"}, 10.0))
    assert {k: str(v) for k, v in got.items()} == {1: "window of 1"}
    assert head.slices == [ENDED_CHECK_S]  # one slice, not the whole 10 s


def test_a_refused_window_reads_as_missing_at_once() -> None:
    head = _Head({"win/0/1/3"}, refused={"win/0/1/3"})
    assert asyncio.run(_merge(head).windows_or_ends({1: "win/0/1/3"}, 10.0)) == {}
    assert len(head.slices) == 1


def test_a_slow_hosts_window_is_taken_when_it_comes() -> None:
    head = _Head(set(), arrives={"win/0/1/3": 3})  # set during the third slice
    got = asyncio.run(_merge(head).windows_or_ends({1: "win/0/1/3"}, 10.0))
    assert {k: str(v) for k, v in got.items()} == {1: "window of 1"} and len(head.slices) == 3


def test_the_wait_ends_at_its_timeout() -> None:
    head = _Head(set())
    assert asyncio.run(_merge(head).windows_or_ends({1: "win/0/1/3"}, 0.0)) == {}
    assert head.slices == []  # nothing left to wait
