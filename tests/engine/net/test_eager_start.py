"""start_eagerly: a coroutine's first part runs in the caller's turn, the rest as a task would."""

from __future__ import annotations

import asyncio

import pytest

from engine.net.eager_start import start_eagerly


def test_the_part_before_the_first_wait_runs_before_it_returns_and_the_rest_in_a_task():
    steps: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate = loop.create_future()

        async def work() -> None:
            steps.append("before")
            value = await gate
            steps.append(f"after {value}")
            await asyncio.sleep(0)  # a bare yield
            steps.append("end")

        task = start_eagerly(work(), loop)
        assert steps == ["before"] and task is not None and not task.done()
        gate.set_result(7)
        await task
        assert steps == ["before", "after 7", "end"]

    asyncio.run(main())


def test_a_coroutine_that_never_waits_ends_in_the_call():
    seen: list[int] = []

    async def work() -> None:
        seen.append(1)

    async def main() -> None:
        assert start_eagerly(work(), asyncio.get_running_loop()) is None

    asyncio.run(main())
    assert seen == [1]


def test_an_error_before_the_first_wait_is_raised_by_the_call():
    async def work() -> None:
        raise OSError("closed")

    async def main() -> None:
        with pytest.raises(OSError, match="closed"):
            start_eagerly(work(), asyncio.get_running_loop())

    asyncio.run(main())


def test_a_failed_wait_is_handed_to_the_coroutine_which_may_catch_it():
    caught: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate = loop.create_future()

        async def work() -> None:
            try:
                await gate
            except ConnectionResetError as exc:
                caught.append(str(exc))

        task = start_eagerly(work(), loop)
        gate.set_exception(ConnectionResetError("gone"))
        assert task is not None
        await task

    asyncio.run(main())
    assert caught == ["gone"]


def test_cancelling_the_task_cancels_the_coroutine_where_it_waits():
    cleaned: list[bool] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def work() -> None:
            try:
                await loop.create_future()  # never resolved
            finally:
                cleaned.append(True)

        task = start_eagerly(work(), loop)
        assert task is not None
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cleaned == [True]
