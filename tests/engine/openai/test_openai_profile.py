"""load.api and the OpenAI transports in the profile: declared once, checked against each other
in one line; the default transport (http or auto) becomes chat_stream, said in one notice."""

from __future__ import annotations

import pytest

from engine.profiles import ProfileError, load_profile
from engine.transport_pick import with_auto_transport

URL = ['server.kind=remote', 'server.url="http://127.0.0.1:8000/v1"']


def test_the_default_transport_becomes_chat_stream() -> None:
    profile, pick = with_auto_transport(load_profile("local", [*URL, "load.api=openai"]), lambda: 0)
    assert profile.load.transport == "chat_stream" and pick is not None
    assert pick.line == ("load.transport = http: chat_stream, the OpenAI API's chat completions, streamed "
                         "(TTFT and ITL are measured)")
    kept, none = with_auto_transport(load_profile("local", [*URL, "load.api=openai", "load.transport=completions"]),
                                     lambda: 0)
    assert kept.load.transport == "completions" and none is None


@pytest.mark.parametrize(("overrides", "words"), [
    ([*URL, "load.api=openai", "load.transport=grpc"], "load.transport: expected 'chat_stream', 'chat', "
                                                      "'completions_stream', 'completions' with load.api = 'openai'"),
    ([*URL, "load.transport=chat"], "load.transport: expected load.api = 'openai' for 'chat'"),
    (["load.api=openai"], "load.api: expected one server URL"),
    ([*URL, "load.api=gemini"], "load.api: expected one of 'triton', 'openai'"),
    ([*URL, "load.api=openai", "load.api_key_env=not a name"], "load.api_key_env"),
])
def test_contradictions_are_one_line(overrides: list[str], words: str) -> None:
    with pytest.raises(ProfileError, match=words):
        load_profile("local", overrides)


def test_a_prompts_file_may_take_its_output_length_from_the_profile() -> None:
    profile = load_profile("local", [*URL, "load.api=openai", 'load.input_data="p.jsonl"', "load.output_tokens=64"])
    assert profile.load.output_tokens == 64
    with pytest.raises(ProfileError, match="load.output_tokens"):  # Triton's: the file's inputs say it
        load_profile("local", [*URL, 'load.input_data="p.jsonl"', "load.output_tokens=64"])
