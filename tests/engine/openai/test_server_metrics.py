"""An OpenAI-compatible server's cache figures from its /metrics page, by each server's names:
deltas of counters, gauges at the interval's end, "not measured" (None) where a server publishes
no such figure, and a restarted server's counters give no figure rather than a negative one. Several replicas: counters'
deltas and requests waiting summed over them all, KV usage their mean and max, and a replica
restarted, unread or without a figure makes that figure not measured for the whole."""

from __future__ import annotations

import pytest

from engine import columns
from engine.events import ServerCache
from engine.openai.server_metrics import (
    ReplicaCaches,
    ReplicaSnapshot,
    between,
    combine,
    parse,
    served_any_before,
    served_before,
)

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


# -- several replicas: every one's /metrics, the figures over them all

def _llama(computed: float, cached: float, deferred: float = 2, kv: float | None = None) -> str:
    page = LLAMA.format(computed=computed, cached=cached).replace("requests_deferred 2", f"requests_deferred {deferred}")
    return page + (f"llamacpp:kv_cache_usage_ratio {kv}\n" if kv is not None else "")


def _edges(*pages: tuple[str | None, str | None]) -> tuple[ReplicaSnapshot, ReplicaSnapshot]:
    """Each replica's (before, after) pages as the two edges' snapshots (None: that page not read)."""
    return (ReplicaSnapshot(tuple(parse(b) if b is not None else None for b, _ in pages)),
            ReplicaSnapshot(tuple(parse(a) if a is not None else None for _, a in pages)))


def test_replicas_counters_are_summed_as_deltas_and_gauges_combined() -> None:
    before, after = _edges((_llama(100, 0, deferred=1, kv=0.2), _llama(150, 150, deferred=1, kv=0.2)),
                           (_llama(7, 7, deferred=0, kv=0.0), _llama(57, 107, deferred=3, kv=0.6)))
    cache = combine(before, after)
    # replica 1: 50 computed + 150 cached; replica 2: 50 computed + 100 cached
    assert cache == ServerCache(server="llama.cpp", prompt_tokens=350.0, cached_tokens=250.0, hit_rate=250 / 350,
                                kv_usage=pytest.approx(0.4), kv_usage_max=0.6, preemptions=None, waiting=4.0)
    # the hit rate over both is not the mean of theirs (0.75 and 0.667)
    assert served_any_before(before) is True and served_any_before(_edges((_llama(0, 0), None),
                                                                          (_llama(0, 0), None))[0]) is False


def test_one_server_reads_as_before() -> None:
    before, after = _edges((_llama(100, 0, kv=0.3), _llama(150, 150, kv=0.5)))
    assert combine(before, after) == between(parse(_llama(100, 0, kv=0.3)), parse(_llama(150, 150, kv=0.5)))
    assert combine(before, after) == ServerCache(server="llama.cpp", prompt_tokens=200.0, cached_tokens=150.0,
                                                 hit_rate=0.75, kv_usage=0.5, kv_usage_max=0.5, waiting=2.0)


def test_a_restarted_replica_makes_the_summed_counters_not_measured() -> None:
    # replica 2 restarted between the edges: its counters went back, so no sum over both is right
    before, after = _edges((_llama(100, 0), _llama(150, 150)), (_llama(500, 500), _llama(10, 0)))
    cache = combine(before, after)
    assert cache is not None and cache.server == "llama.cpp"
    assert (cache.prompt_tokens, cache.cached_tokens, cache.hit_rate) == (None, None, None)
    assert cache.waiting == 4.0  # a gauge both published at the end is still summed


def test_a_replica_without_metrics_makes_every_figure_not_measured_never_0() -> None:
    read = (_llama(100, 0, kv=0.2), _llama(150, 150, kv=0.2))
    for missing in ((None, None), (None, read[1]), (read[0], None)):  # no /metrics, or one edge not read
        before, after = _edges(read, missing)
        cache = combine(before, after)
        assert cache == ServerCache(server="llama.cpp"), missing  # every figure None, the server named
    # a replica whose page has none of the names each server publishes (Triton's): the same
    before, after = _edges(read, ('nv_inference_count{model="x"} 5\n', 'nv_inference_count{model="x"} 9\n'))
    assert combine(before, after) == ServerCache(server="llama.cpp")
    assert served_any_before(before) is True  # one replica had served: warm, whatever the other
    idle = _edges((_llama(0, 0), None), ('nv_inference_count{model="x"} 5\n', None))[0]
    assert served_any_before(idle) is None  # one idle, the other's warmth not known: not known
    # a replica whose KV usage is not published: the mean over the others would be wrong
    before, after = _edges(read, (_llama(1, 1), _llama(2, 2)))
    cache = combine(before, after)
    assert cache is not None and cache.kv_usage is None and cache.kv_usage_max is None and cache.prompt_tokens == 202.0
    assert combine(None, after) is None and combine(ReplicaSnapshot((None, None)), after) is None


async def test_every_replicas_metrics_page_is_read_and_one_gone_is_not_measured() -> None:
    from tests.engine.openai.fake_openai import FakeOpenAi

    fakes = [FakeOpenAi(metrics={"llamacpp:prompt_tokens_total": 10, "llamacpp:prompt_tokens_cached_total": 0,
                                 "llamacpp:requests_deferred": 1, "llamacpp:kv_cache_usage_ratio": kv})
             for kv in (0.1, 0.5)]
    bare = FakeOpenAi()  # no /metrics: HTTP 404
    ports = [await f.start() for f in (*fakes, bare)]
    urls = [f"http://127.0.0.1:{p}/v1" for p in ports]
    try:
        caches = ReplicaCaches(urls[:2], {})
        before = await caches.snapshot(2.0)
        assert caches.served_before(before) is True
        for fake, (prompt, cached) in zip(fakes, ((40, 30), (100, 0)), strict=True):
            assert fake.metrics is not None
            fake.metrics["llamacpp:prompt_tokens_total"] += prompt
            fake.metrics["llamacpp:prompt_tokens_cached_total"] += cached
        after = await caches.snapshot(2.0)
        assert caches.between(before, after) == ServerCache(
            server="llama.cpp", prompt_tokens=170.0, cached_tokens=30.0, hit_rate=30 / 170, kv_usage=pytest.approx(0.3),
            kv_usage_max=0.5, waiting=2.0)
        with_bare = ReplicaCaches(urls, {})
        cache = with_bare.between(await with_bare.snapshot(2.0), await with_bare.snapshot(2.0))
        assert cache == ServerCache(server="llama.cpp")
        await fakes[1].close()  # a replica gone: its page cannot be read, and nothing fails
        cache = caches.between(await caches.snapshot(2.0), await caches.snapshot(2.0))
        assert cache == ServerCache(server="llama.cpp")
        await fakes[0].close()
        assert await caches.snapshot(2.0) is None  # none read: the interval is not measured at all
    finally:
        for f in (*fakes, bare):
            await f.close()
