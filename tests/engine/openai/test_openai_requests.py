"""The requests an OpenAI sweep sends: strictly the standard fields, plus the output-length ones
(ignore_eos, min_tokens) only where asked; the key only as a bearer token to the URL's server."""

from __future__ import annotations

import json

from engine.net.http1 import parse_endpoint
from engine.openai.requests import Prompt, body, http_request, synthetic
from engine.prompts import DEFAULT_WORDS


def test_a_streamed_chat_request_asks_for_usage_and_exact_length() -> None:
    doc = json.loads(body("m", Prompt("hello there", 16), chat=True, stream=True))
    assert doc == {"model": "m", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 16,
                   "ignore_eos": True, "min_tokens": 16, "stream": True, "stream_options": {"include_usage": True}}


def test_a_whole_completion_without_a_length_is_only_standard_fields() -> None:
    assert json.loads(body("m", Prompt("hi", None), chat=False, stream=False)) == {"model": "m", "prompt": "hi"}
    strict = json.loads(body("m", Prompt("hi", 4), chat=False, stream=False, exact=False))
    assert strict == {"model": "m", "prompt": "hi", "max_tokens": 4}  # load.ignore_eos = false


def test_the_key_is_a_bearer_token_to_the_urls_own_server() -> None:
    ep = parse_endpoint("http://10.0.0.7:8000/v1")
    raw = http_request(ep, "/chat/completions", b"{}", True, "sk-1").decode()
    assert raw.startswith("POST /v1/chat/completions HTTP/1.1\r\nHost: 10.0.0.7:8000\r\n")
    assert "\r\nAuthorization: Bearer sk-1\r\n" in raw and "\r\nAccept: text/event-stream\r\n" in raw
    assert "Authorization" not in http_request(ep, "/completions", b"{}", False, None).decode()


def test_synthetic_prompts_by_default() -> None:
    made = synthetic("", 32)
    assert made.source == "synthetic" and len(made.prompts) == 1
    assert made.prompts[0].words == DEFAULT_WORDS and made.prompts[0].max_tokens == 32
    spread = synthetic("100+-20", "", 64)
    assert len(spread.prompts) == 64 and all(80 <= p.words <= 120 for p in spread.prompts)
    assert synthetic("100+-20", "", 64).prompts == spread.prompts  # the same every run
