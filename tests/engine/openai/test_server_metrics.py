"""An OpenAI-compatible server's cache figures from its /metrics page, by each server's names:
deltas of counters, gauges at the interval's end, "not measured" (None) where a server publishes
no such figure, and a restarted server's counters give no figure rather than a negative one."""

from __future__ import annotations

from engine import columns
from engine.events import ServerCache
from engine.openai.server_metrics import between, parse, served_before

LLAMA = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {computed}
llamacpp:prompt_tokens_cached_total {cached}
llamacpp:tokens_predicted_total 8
llamacpp:requests_deferred 2
"""

VLLM = """vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {queries}
vllm:prefix_cache_queries_total{{engine="1",model_name="m"}} {queries}
vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}
vllm:prefix_cache_hits_total{{engine="1",model_name="m"}} {hits}
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.25
vllm:num_preemptions_total{{engine="0",model_name="m"}} {preempted}
vllm:num_requests_waiting{{engine="0",model_name="m"}} 3
"""


def test_llama_cpp_counts_cached_tokens_beside_the_computed_ones() -> None:
    before = parse(LLAMA.format(computed=100, cached=0))
    after = parse(LLAMA.format(computed=150, cached=150))
    cache = between(before, after)
    # llama.cpp's prompt counter leaves the cached tokens out: 50 computed + 150 cached
    assert cache == ServerCache(server="llama.cpp", prompt_tokens=200.0, cached_tokens=150.0, hit_rate=0.75,
                                kv_usage=None, preemptions=None, waiting=2.0)
    assert served_before(before) is True and served_before(parse(LLAMA.format(computed=0, cached=0))) is False


def test_vllm_sums_its_engines_and_reads_kv_usage_and_preemptions() -> None:
    before = parse(VLLM.format(queries=1000, hits=100, preempted=1))
    after = parse(VLLM.format(queries=2000, hits=600, preempted=4))
    cache = between(before, after)
    assert cache is not None and cache.server == "vLLM"
    assert (cache.prompt_tokens, cache.cached_tokens, cache.hit_rate) == (2000.0, 1000.0, 0.5)
    assert (cache.kv_usage, cache.preemptions, cache.waiting) == (0.25, 3.0, 3.0)


def test_no_cache_names_a_restart_or_a_missing_edge_is_not_measured() -> None:
    assert parse("nv_inference_count{model=\"x\"} 5\n") is None  # Triton's page: none of ours
    restarted = between(parse(LLAMA.format(computed=500, cached=500)), parse(LLAMA.format(computed=10, cached=0)))
    assert restarted is not None and restarted.hit_rate is None and restarted.prompt_tokens is None
    assert between(None, parse(LLAMA.format(computed=1, cached=1))) is None
    idle = between(parse(LLAMA.format(computed=5, cached=5)), parse(LLAMA.format(computed=5, cached=5)))
    assert idle is not None and idle.hit_rate is None  # no prompt over the interval: no rate, not 0


def test_the_table_shows_the_hit_rate_and_not_measured_as_a_dash() -> None:
    figures = columns.LevelFigures(mode="concurrency", level=1, status="stable",
                                   cache=ServerCache(server="llama.cpp", hit_rate=0.625, state="cold"))
    cols = columns.with_cache(columns.SWEEP_SCREEN)
    cells = columns.cells(cols, figures)
    assert (cells["prefix_hit"], cells["kv_usage"], cells["preempt"], cells["cache_state"]) == ("62%", "-", "-", "cold")


async def test_a_reset_where_the_server_offers_none_says_why() -> None:
    from engine.openai.server_metrics import OpenAiCache
    from tests.engine.openai.fake_openai import FakeOpenAi

    fake = FakeOpenAi()
    port = await fake.start()
    try:  # the fake has no /metrics: the cache is not read, and nothing is reset
        why = await OpenAiCache(f"http://127.0.0.1:{port}/v1", {}).reset(5.0)
    finally:
        await fake.close()
    assert why == "the server's cache names none we know how to reset (llama.cpp, vLLM, SGLang)"
