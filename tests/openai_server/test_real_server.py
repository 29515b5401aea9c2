"""The real OpenAI-compatible server the tests start (tests/conftest.py's openai_server): one streaming chat completion
with usage, read as server-sent events over a plain HTTP connection, and output length held by
max_tokens with ignore_eos (the tiny model's random weights may sample its end token early)."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit


def stream_chat(base_url: str, body: dict) -> tuple[list[dict], list[str]]:
    """POST /chat/completions with "stream": true; the decoded `data:` chunks and the raw lines."""
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        conn.request("POST", f"{url.path}/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()[:500]
        assert resp.getheader("Content-Type", "").startswith("text/event-stream")
        chunks: list[dict] = []
        lines: list[str] = []
        for raw in resp:
            line = raw.decode().rstrip("\r\n")
            lines.append(line)
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                break
            chunks.append(json.loads(data))
        return chunks, lines
    finally:
        conn.close()


def test_streaming_chat_completion_reports_usage(openai_server):
    chunks, lines = stream_chat(openai_server.base_url, {
        "model": openai_server.model,
        "messages": [{"role": "user", "content": "hello, tell me a short story"}],
        "max_tokens": 16,
        "stream": True,
        "stream_options": {"include_usage": True},
        "seed": 56,
    })
    assert "data: [DONE]" in lines, lines[-5:]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert text, f"no content in the deltas: {chunks[:3]}"
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert len(usage) == 1, f"expected one usage chunk, got {usage}"
    final = usage[0]
    for key in ("prompt_tokens", "completion_tokens"):
        assert isinstance(final[key], int) and final[key] > 0, final
    assert final["completion_tokens"] <= 16, final
    assert chunks[-1].get("usage") == final and not chunks[-1].get("choices"), chunks[-1]


def post_json(base_url: str, path: str, body: dict) -> dict:
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        conn.request("POST", f"{url.path}{path}", body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        assert resp.status == 200, data[:500]
        return json.loads(data)
    finally:
        conn.close()


def test_max_tokens_with_ignore_eos_holds_the_output_length(openai_server):
    answer = post_json(openai_server.base_url, "/completions", {
        "model": openai_server.model, "prompt": "hello world", "max_tokens": 48, "ignore_eos": True})
    assert answer["usage"]["completion_tokens"] == 48, answer["usage"]
    assert answer["choices"][0]["finish_reason"] == "length", answer["choices"][0]
