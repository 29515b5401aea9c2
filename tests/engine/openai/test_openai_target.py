"""Opening an OpenAI-compatible server: the model from /v1/models, the API key, and every way the
server or the user can be wrong, each one line (a UserError) before any load; the /v1 rule."""

from __future__ import annotations

import pytest

from engine.errors import UserError
from engine.openai.answer import Answer
from engine.openai.target import api_key, open_target
from engine.transport_table import OPENAI, TRITON, api_of_url
from tests.engine.openai.fake_openai import FakeOpenAi


async def _open(fake: FakeOpenAi, wanted: str, key: str | None = None):
    port = await fake.start()
    try:
        return await open_target(f"http://127.0.0.1:{port}/v1", wanted, key)
    finally:
        await fake.close()


async def test_the_model_named_or_the_first_served() -> None:
    fake = FakeOpenAi(models=("a-model", "b-model"))
    assert (await _open(fake, "b-model")).model == "b-model"
    chosen = await _open(FakeOpenAi(models=("a-model", "b-model")), "vit_tiny")  # model.name left at its default
    assert chosen.model == "a-model" and chosen.served == ("a-model", "b-model")


async def test_a_wrong_model_names_those_served() -> None:
    with pytest.raises(UserError, match=r"^model.name: the server does not serve 'gpt-9'; it serves a-model, b-model$"):
        await _open(FakeOpenAi(models=("a-model", "b-model")), "gpt-9")


async def test_a_server_that_is_not_openai_is_one_line() -> None:
    with pytest.raises(UserError, match=r"/v1/models: not an OpenAI-compatible server \(HTTP 404"):
        await _open(FakeOpenAi(mode="not_openai"), "vit_tiny")


async def test_a_refused_key_and_a_missing_one_are_one_line() -> None:
    with pytest.raises(UserError, match=r"^the server refused the API key \(HTTP 401"):
        await _open(FakeOpenAi(key="right"), "vit_tiny", "wrong")
    with pytest.raises(UserError, match=r"^the server asks for an API key \(HTTP 401.*OPENAI_API_KEY"):
        await _open(FakeOpenAi(key="right"), "vit_tiny", None)


async def test_an_unreachable_server_is_one_line() -> None:
    with pytest.raises(UserError, match=r"^http://127.0.0.1:9/v1/models: cannot reach the server: connection refused$"):
        await open_target("http://127.0.0.1:9/v1", "vit_tiny", None)


def test_the_key_from_a_file_or_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-env")
    assert api_key("MY_KEY", "") == "sk-env"
    assert api_key("UNSET_KEY_VAR", "") is None
    (tmp_path / "key").write_text("sk-file\n")
    assert api_key("MY_KEY", str(tmp_path / "key")) == "sk-file"  # the file wins
    with pytest.raises(UserError, match="load.api_key_file: .*: cannot read it"):
        api_key("MY_KEY", str(tmp_path / "missing"))
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(UserError, match="load.api_key_file: .*: empty"):
        api_key("MY_KEY", str(tmp_path / "empty"))


def test_a_url_ending_in_v1_is_the_openai_api() -> None:
    assert api_of_url("http://127.0.0.1:8000/v1") == OPENAI
    assert api_of_url("https://llm.example.com/v1/") == OPENAI
    assert api_of_url("http://127.0.0.1:8000/proxy/v1") == OPENAI
    assert api_of_url("http://127.0.0.1:8000") == TRITON
    assert api_of_url("http://127.0.0.1:8000/v2") == TRITON
    assert api_of_url("http://127.0.0.1:8000/v10") == TRITON


def test_answer_checks_hold_usage_to_its_bounds() -> None:
    a = Answer(chat=False)
    a.take({"choices": [{"text": "hello world", "finish_reason": None}]}, True)
    a.take({"choices": [{"text": " again", "finish_reason": "stop"}], "usage": {"prompt_tokens": -1,
                                                                               "completion_tokens": 3}}, True)
    assert a.verdict(None) == "usage.prompt_tokens = -1, not a count within 0..16777216"
    b = Answer(chat=False)
    b.take({"choices": [{"text": "one two", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 9}}, True)
    assert b.verdict(8) == "usage.completion_tokens = 9, more than the max_tokens asked (8)"
    assert b.words == 2
    c = Answer(chat=True)
    c.take({"choices": [{"delta": {"content": "hel"}, "finish_reason": None}]}, True)
    c.take({"choices": [{"delta": {"content": "lo there"}, "finish_reason": None}]}, True)  # a word across chunks
    assert c.words == 2 and c.verdict(None) == "no finish_reason on the last choice: the answer was cut short"
    assert Answer(chat=True).verdict(None) == "an answer with no text"
    blank = Answer(chat=True)  # six tokens that render as nothing, counted and finished by the server
    blank.take({"choices": [{"delta": {"content": ""}, "finish_reason": None}]}, True)
    blank.take({"choices": [{"delta": {}, "finish_reason": "length"}], "usage": {"prompt_tokens": 9, "completion_tokens": 6}},
               True)
    assert blank.verdict(6) is None and blank.output_tokens == 6
    unfinished = Answer(chat=True)
    unfinished.take({"choices": [{"delta": {"content": ""}, "finish_reason": None}],
                     "usage": {"prompt_tokens": 9, "completion_tokens": 6}}, True)
    assert unfinished.verdict(6) == "an answer with no text"


def test_an_error_answer_is_one_line_in_the_servers_words() -> None:
    from engine.openai.transport import status_words

    said = b'{"error": {"message": "The model `x` does not exist.", "type": "NotFoundError", "code": 404}}'
    assert status_words(404, said) == ("rejected", "HTTP 404: The model `x` does not exist.")
    assert status_words(503, b"upstream\n  overloaded") == ("server_error", "HTTP 503: upstream overloaded")
    assert status_words(401, b"") == ("rejected", "HTTP 401: the server refused the API key")
    assert status_words(500, b"[" * 100_000) == ("server_error", "HTTP 500: " + "[" * 200)  # JSON too deep: its start
    whole = Answer(chat=True)
    whole.take({"error": {"message": "context length exceeded\nby 12 tokens"}}, False)
    assert whole.error == "context length exceeded by 12 tokens"
