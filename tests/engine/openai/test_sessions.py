"""Multi-turn sessions (load.turns): each connection is one user whose conversation grows turn by
turn: the server sees the conversation so far, its own answer appended as the assistant's, and a
new user message; after load.turns turns a new conversation starts. Swept end to end (real load
workers) against the fake server, which keeps every chat request's messages."""

from __future__ import annotations

import asyncio

import pytest

from engine.errors import UserError
from engine.load.sweep import run_sweep
from engine.openai.api import OpenAiApi
from engine.openai.target import open_target
from tests.engine.load.conftest import Events, quick_load
from tests.engine.openai.fake_openai import FakeOpenAi

TURNS, OUT = 3, 6
ANSWER = "".join(f" word{k}" for k in range(OUT))  # the fake's answer to max_tokens = OUT


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["chat_stream", "chat"])
async def test_a_sessions_context_grows_turn_by_turn(transport: str) -> None:
    fake = FakeOpenAi()
    port = await fake.start()
    try:
        target = await open_target(f"http://127.0.0.1:{port}/v1", "vit_tiny", None)
        load = quick_load(concurrency=[2], transport=transport, api="openai", output_tokens=OUT, turns=TURNS,
                          stability_percent=50)
        results = await run_sweep(OpenAiApi(target, None), load, Events().append, asyncio.Event())
    finally:
        await fake.close()
    (r,) = results
    assert r.errors == 0 and r.requests > 0, r.error_messages
    seen = fake.seen_messages
    assert {len(m) for m in seen} == {1, 3, 5}  # turn 1, 2 and 3: user, then + assistant and user each turn
    users = {m[0]["content"] for m in seen if len(m) == 1}
    for messages in seen:
        assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2) + ["user"]
        # every assistant message is the server's own answer, whole
        assert all(m["content"] == ANSWER for m in messages if m["role"] == "assistant")
        assert len({m["content"] for m in messages if m["role"] == "user"}) == len(messages) // 2 + 1  # new each turn
    # a later turn carries its first turn as the server saw it: a conversation, not unrelated prompts
    later = [m for m in seen if len(m) > 1]
    assert later and all(m[0]["content"] in users for m in later)


def test_a_session_is_a_chat() -> None:
    fake_target = type("T", (), {"url": "http://127.0.0.1:9/v1", "model": "m"})()
    api = OpenAiApi(fake_target, None)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="load.turns: a multi-turn session is a chat"):
        api.transport(quick_load(transport="completions_stream", api="openai", turns=2))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ok", "close_after_answer"])  # a kept connection, and one closed after each answer
async def test_a_user_thinks_between_answer_and_next_request(mode: str) -> None:
    fake = FakeOpenAi(mode=mode)
    port = await fake.start()
    try:
        target = await open_target(f"http://127.0.0.1:{port}/v1", "vit_tiny", None)
        load = quick_load(concurrency=[1], transport="chat_stream", api="openai", output_tokens=4, turns=2,
                          think_time_s=0.25, stability_percent=200, min_window_requests=2)
        results = await run_sweep(OpenAiApi(target, None), load, Events().append, asyncio.Event())
    finally:
        await fake.close()
    (r,) = results
    assert r.errors == 0 and r.requests > 0, r.error_messages
    # one user who thinks 0.25 s after each answer completes at most one request per 0.25 s, plus
    # one at each window's very start (a window of w seconds holds at most w / 0.25 + 1 answers),
    # however fast the server (a bound, not a timing: a busy box only lowers the count). Without
    # the pause the fake server answers hundreds a second. Beside two CPU hogs 3 windows of 0.3 s
    # held 6: more than the span's one extra allowed, within each window's.
    assert r.duration_s is not None and r.requests <= r.duration_s / 0.25 + r.windows, (r.requests, r.duration_s)
    assert {len(m) for m in fake.seen_messages} == {1, 3}  # the sessions go on across the pauses
