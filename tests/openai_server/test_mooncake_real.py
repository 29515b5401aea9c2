"""A Mooncake trace replayed as prompts against the real llama-server (tiny model): requests whose
hash ids share leading blocks share the server's cache as the trace says (its /metrics' hit rate),
against a trace of the same lengths whose ids never recur."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.openai_server.test_server_cache import _sweep

LINES, BLOCK, BLOCKS = 1500, 16, 7  # 7 blocks of 16 words a request: 6 shared in the first trace, then its own


def _trace(path: Path, shared: bool) -> Path:
    with path.open("w") as f:
        for k in range(LINES):
            head = [100 * (k % 2) + j for j in range(BLOCKS - 1)] if shared else \
                [10_000 + k * BLOCKS + j for j in range(BLOCKS - 1)]
            f.write(json.dumps({"timestamp": k * 10, "input_length": BLOCK * BLOCKS, "output_length": 6,
                                "hash_ids": [*head, 1_000_000 + k]}) + "\n")
    return path


@pytest.mark.slow
def test_a_traces_shared_hash_ids_are_the_servers_cache_hits(openai_server, tmp_path: Path) -> None:
    runs = {}
    for name, shared in (("shared", True), ("unique", False)):
        args = ("--input-data", str(_trace(tmp_path / f"{name}.jsonl", shared)), "--set", f"load.block_tokens={BLOCK}")
        levels, _, _ = _sweep(openai_server, args, tmp_path / name)
        runs[name] = [r.cache.hit_rate for r in levels if r.cache]
        assert all(r.stream and r.stream.tokens_per_request == 6 for r in levels)  # output_length, not load.output_tokens (8)
    assert len(runs["shared"]) == 2 and all(h is not None and h > 0.6 for h in runs["shared"]), runs
    assert len(runs["unique"]) == 2 and all(h is not None and h < 0.3 for h in runs["unique"]), runs
