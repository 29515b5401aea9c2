"""The OpenAI API swept end to end through the seam (run_sweep, real load worker processes) against
the fake server of tests/engine/openai/fake_openai.py: each transport's figures come from the
server's usage and the kernel's stamps; each hostile answer fails its level in the right words."""

from __future__ import annotations

import asyncio

import pytest

from engine.errors import UserError
from engine.load.server_api import ServerApi
from engine.load.sweep import run_sweep
from engine.openai.api import OpenAiApi
from engine.openai.target import open_target
from engine.prompts import DEFAULT_WORDS
from tests.engine.load.conftest import Events, quick_load
from tests.engine.openai.fake_openai import TEMPLATE_TOKENS, FakeOpenAi


async def _sweep(fake: FakeOpenAi, transport: str, **load: object) -> tuple[list, Events]:
    port = await fake.start()
    events = Events()
    try:
        target = await open_target(f"http://127.0.0.1:{port}/v1", "vit_tiny", fake.key)
        api: ServerApi = OpenAiApi(target, fake.key)  # mypy holds it to the Protocol
        # two windows a level (each of 20 answers or more, quick_load's): what is checked is each
        # level's figures, not how many windows it took to settle
        settings = dict(concurrency=[1, 2], transport=transport, api="openai", output_tokens=8, stability_percent=50,
                        stable_windows=2)
        settings.update(load)
        results = await run_sweep(api, quick_load(**settings), events.append, asyncio.Event())
    finally:
        await fake.close()
    return results, events


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["chat_stream", "completions_stream", "chat", "completions"])
async def test_each_transport_measures_tokens_from_usage(transport: str) -> None:
    results, events = await _sweep(FakeOpenAi(), transport)
    assert [r.level for r in results] == [1.0, 2.0]
    for r in results:
        assert r.status in ("stable", "unstable") and r.errors == 0, (r.status, r.error_messages)
        s = r.stream
        assert s is not None and r.server is None  # no statistics: not measured, not 0
        assert r.cache is None  # no /metrics page (404): the server's cache is not measured, not 0
        assert s.cached_tokens_per_request is None  # nor in its usage (no prompt_tokens_details)
        assert s.tokens_per_request == 8  # usage.completion_tokens: max_tokens, as ignore_eos asks
        assert s.input_tokens_per_request == DEFAULT_WORDS + TEMPLATE_TOKENS  # usage.prompt_tokens, not our words
        assert s.input_tokens_per_s is not None and s.input_tokens_per_s > 0
        assert not s.tokens_are_words
        assert s.output_tokens_per_s == pytest.approx(8 * r.requests / r.duration_s, rel=0.2)
        assert s.ttft.p50 is not None and s.ttft.p50 > 0
        if transport.endswith("_stream"):
            assert s.responses_per_request == 8 and s.itl.count > 0 and s.itl.p50 is not None
            assert s.ttft.p50 < r.latency.p50  # the first token before the last
        else:
            assert s.responses_per_request == 1 and s.itl.count == 0  # a whole answer: no ITL to measure
    assert not events.of("error")


@pytest.mark.slow
async def test_a_server_without_usage_gives_words_flagged_as_words() -> None:
    results, _ = await _sweep(FakeOpenAi(mode="no_usage"), "chat_stream", concurrency=[1])
    (r,) = results
    assert r.errors == 0 and r.stream is not None
    assert r.stream.tokens_are_words
    assert r.stream.tokens_per_request == 8  # the eight words streamed
    assert r.stream.input_tokens_per_request == DEFAULT_WORDS  # the prompt's words: no template counted


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "kind", "words"), [
    ("error_mid", "server_error", "the server's error: CUDA out of memory while decoding"),
    ("truncated", "malformed_answer", "the stream ended without data: [DONE]: cut short"),
    ("bad_usage", "malformed_answer", "usage.completion_tokens = 1 for 8 chunks of text"),
    ("huge_event", "response_too_large", "response_too_large: an event past 1048576 bytes"),
])
async def test_a_bad_answer_fails_the_level_in_the_servers_words(mode: str, kind: str, words: str) -> None:
    results, _ = await _sweep(FakeOpenAi(mode=mode), "chat_stream", concurrency=[1], on_level_failure="stop")
    (r,) = results
    assert r.status == "failed" and r.errors_by_kind.get(kind, 0) > 0, (r.status, r.errors_by_kind)
    assert r.error_messages and r.error_messages[0].startswith(words), r.error_messages


@pytest.mark.slow
async def test_a_key_the_server_asks_for_is_sent_as_a_bearer_token() -> None:
    fake = FakeOpenAi(key="sk-test-123")
    results, _ = await _sweep(fake, "completions_stream", concurrency=[1])
    assert results[0].errors == 0
    assert fake.seen_auth and set(fake.seen_auth) == {"Bearer sk-test-123"}


async def test_a_transport_of_triton_is_one_line_before_any_load() -> None:
    fake = FakeOpenAi()
    port = await fake.start()
    try:
        api = OpenAiApi(await open_target(f"http://127.0.0.1:{port}/v1", "tiny-llm", None), None)
        with pytest.raises(UserError, match="the OpenAI API offers chat_stream, chat, completions_stream, completions"):
            await run_sweep(api, quick_load(transport="http"), Events().append, asyncio.Event())
    finally:
        await fake.close()
    assert fake.completions == 0


@pytest.mark.slow
async def test_prompts_from_a_jsonl_file(tmp_path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('"one two three"\n\n{"text": "four five", "max_tokens": 4}\n{"prompt": "six"}\n')
    results, events = await _sweep(FakeOpenAi(), "completions_stream", concurrency=[1], input_data=str(prompts))
    (r,) = results
    assert r.errors == 0 and r.stream is not None
    (used,) = events.of("input_data")
    assert used.path == str(prompts) and used.entries == 3 and used.source == "jsonl"
    # max_tokens 8 (load.output_tokens) for two prompts, 4 for the one that says so: the mean lies between
    assert r.stream.tokens_per_request is not None and 4 < r.stream.tokens_per_request < 8
    # prompts of 3, 2 and 1 words, each with the template's tokens: between 1 and 3 words' worth
    assert r.stream.input_tokens_per_request is not None
    assert 1 + TEMPLATE_TOKENS < r.stream.input_tokens_per_request < 3 + TEMPLATE_TOKENS


@pytest.mark.parametrize(("text", "words"), [
    ("not json\n", "line 1 is not JSON"),
    ('"fine"\n[1, 2]\n', "line 2 is neither a string nor an object"),
    ('{"txt": "typo"}\n', "line 1 has no prompt"),
    ('{"text": "a", "max_tokens": 0}\n', "line 1: max_tokens is 0, not a count of 1 or more"),
    ("\n\n", "no prompts"),
])
def test_a_bad_prompts_file_is_one_line(tmp_path, text: str, words: str) -> None:
    from engine.openai.requests import read_jsonl

    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(UserError, match=words):
        read_jsonl(str(path), "")


@pytest.mark.slow
async def test_a_key_refused_during_the_sweep_fails_the_level_in_one_line() -> None:
    fake = FakeOpenAi(key="the-right-one")
    port = await fake.start()
    try:
        target = await open_target(f"http://127.0.0.1:{port}/v1", "tiny-llm", "the-right-one")
        api = OpenAiApi(target, "revoked-key")  # the key the requests carry is no longer the server's
        load = quick_load(concurrency=[1], transport="chat", api="openai", on_level_failure="stop")
        (r,) = await run_sweep(api, load, Events().append, asyncio.Event())
    finally:
        await fake.close()
    assert r.status == "failed" and r.errors_by_kind.get("rejected", 0) > 0, r.errors_by_kind
    assert r.error_messages[0] == "HTTP 401: the server refused the API key (Incorrect API key provided)"


@pytest.mark.slow
async def test_a_server_that_closes_after_each_answer_loses_no_measured_request() -> None:
    """The first close is learnt (in the warm-up, as a rule), and each request then goes out on a
    fresh connection: the levels' measured windows hold no lost request."""
    results, events = await _sweep(FakeOpenAi(mode="close_after_answer"), "chat_stream")
    assert [r.level for r in results] == [1.0, 2.0]
    for r in results:
        assert r.requests > 0 and r.errors == 0, (r.status, r.error_messages)
        assert r.stream is not None and r.stream.tokens_per_request == 8


async def test_a_request_that_crosses_the_servers_close_goes_again_even_in_the_warm_up() -> None:
    """Four connections' second requests cross the server's closes at once, before any was
    learnt: each goes again on a fresh connection, so no window, warm-up included, counts a loss."""
    from engine.events import WindowResult

    results, events = await _sweep(FakeOpenAi(mode="close_after_answer"), "chat_stream", concurrency=[4])
    windows = [e for e in events if isinstance(e, WindowResult)]
    assert windows and any(w.warmup for w in windows)
    assert sum(w.requests for w in windows) > 0 and [w.errors for w in windows] == [0] * len(windows)
    assert results[0].errors == 0 and results[0].requests > 0


@pytest.mark.slow
async def test_two_replicas_caches_are_read_from_both_and_one_without_metrics_is_not_measured() -> None:
    def page(kv: float) -> dict[str, float]:  # llama.cpp's names; the fake counts each answer's prompt tokens
        return {"llamacpp:prompt_tokens_total": 0, "llamacpp:prompt_tokens_cached_total": 0,
                "llamacpp:requests_deferred": 1, "llamacpp:kv_cache_usage_ratio": kv}

    async def sweep(fakes: list[FakeOpenAi]) -> list:
        ports = [await f.start() for f in fakes]
        try:
            urls = [f"http://127.0.0.1:{p}/v1" for p in ports]
            api = OpenAiApi(await open_target(urls[0], "vit_tiny", None), None, urls[1:])
            load = quick_load(concurrency=[2], transport="completions", api="openai", output_tokens=4,
                              stability_percent=50)
            return await run_sweep(api, load, Events().append, asyncio.Event())
        finally:
            for f in fakes:
                await f.close()

    both = [FakeOpenAi(metrics=page(0.1), gap_s=0.0005), FakeOpenAi(metrics=page(0.5), gap_s=0.0005)]
    (r,) = await sweep(both)
    assert r.errors == 0 and [e.requests > 0 for e in r.endpoints] == [True, True]
    c = r.cache
    # the gauges each replica publishes, combined: waiting summed, KV usage their mean and max
    assert c is not None and c.server == "llama.cpp" and c.waiting == 2.0
    assert c.kv_usage == pytest.approx(0.3) and c.kv_usage_max == 0.5
    # the prompt tokens of both replicas' answers over the level, each request's the same
    per_request = DEFAULT_WORDS + TEMPLATE_TOKENS
    taken = sum(f.metrics["llamacpp:prompt_tokens_total"] for f in both if f.metrics is not None)
    assert c.prompt_tokens is not None and 0 < c.prompt_tokens <= taken and c.prompt_tokens % per_request == 0
    assert c.cached_tokens == 0 and c.hit_rate == 0.0 and c.state == "cold"
    # the second replica has no /metrics (404): nothing over both is measured, never 0, and the level runs
    (r,) = await sweep([FakeOpenAi(metrics=page(0.1), gap_s=0.0005), FakeOpenAi(gap_s=0.0005)])
    assert r.errors == 0 and r.cache is not None
    assert (r.cache.prompt_tokens, r.cache.hit_rate, r.cache.kv_usage, r.cache.kv_usage_max, r.cache.waiting) == \
        (None, None, None, None, None)
