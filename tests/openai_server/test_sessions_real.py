"""Multi-turn sessions against the real llama-server (tiny model): a 3-turn session's requests carry
more prompt tokens per request than single turns of the same prompts (its context grows), and the
server finds each turn's earlier context in its cache (its /metrics), where distinct single turns
find next to nothing."""

from __future__ import annotations

import pytest

from tests.openai_server.test_server_cache import _sweep

# each level starts with the server's cache emptied: what the suite's earlier tests sent the same
# server (the same generated prompts) would otherwise count as single turns' hits
WORKLOAD = ("--set", "load.input_tokens=24", "--set", "load.cache_reset=each_level")


@pytest.mark.slow
def test_a_session_carries_its_context_and_the_server_caches_it(openai_server, tmp_path) -> None:
    single, _, _ = _sweep(openai_server, WORKLOAD, tmp_path / "one")
    turns, _, _ = _sweep(openai_server, (*WORKLOAD, "--set", "load.turns=3"), tmp_path / "three")
    for a, b in zip(single, turns, strict=True):
        assert a.stream and b.stream and a.cache and b.cache
        assert a.stream.input_tokens_per_request and b.stream.input_tokens_per_request
        # turns 1, 2 and 3 carry about 1, 2 and 3 prompts (and 2 answers): about twice on the mean
        assert b.stream.input_tokens_per_request > 1.5 * a.stream.input_tokens_per_request, (a.stream, b.stream)
        assert b.cache.hit_rate is not None and a.cache.hit_rate is not None
        assert b.cache.hit_rate > 0.3 > a.cache.hit_rate, (a.cache, b.cache)
