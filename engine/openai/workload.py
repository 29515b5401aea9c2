"""An OpenAI sweep's synthetic workload: load.distinct_prompts prompts, each with words of its own
(so that a server's prefix cache finds nothing by accident: a sweep sends them in turn and sends
one again only after all), lengths from load.input_tokens / load.output_tokens's distributions
(engine/length_spec.py), and, with load.prefix_groups and load.prefix_tokens, shared prefixes:
prompt k opens with group k mod G's prefix of P words, then its own input_tokens words.

The same every run (a fixed seed). A word is a token for a word-level tokenizer; a model's own
counts more or fewer (the server's usage and /metrics count its own).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from engine.errors import UserError
from engine.prompts import DEFAULT_WORDS, SEED, lengths, prompt_text

MAX_WORDS = 48 << 20  # every prompt's words together, past which the sweep's requests would not fit a worker


@dataclass(frozen=True)
class Workload:
    texts: list[str]
    max_tokens: list[int | None]
    label: str  # the recording's words for it
    spec: str  # what its sha256 is of


def synthetic_workload(input_tokens: object, output_tokens: object, count: int, groups: int = 0,
                       prefix_words: int = 0) -> Workload:
    """``count`` prompts (see the module docstring); raises UserError when they would not fit."""
    rng = random.Random(SEED)
    suffix = lengths(input_tokens, "input_tokens", count, rng) if input_tokens != "" else [DEFAULT_WORDS] * count
    outs = lengths(output_tokens, "output_tokens", count, rng) if output_tokens != "" else None
    words = sum(suffix) + count * prefix_words
    if words > MAX_WORDS:
        raise UserError(f"load.distinct_prompts: {count} prompts of these lengths make {words:,} words, over the "
                        f"{MAX_WORDS:,} a sweep holds: ask for fewer")
    prefixes = [prompt_text(random.Random(f"{SEED}-prefix-{g}"), prefix_words) for g in range(groups)]
    texts = [f"{prefixes[k % groups]} {prompt_text(rng, suffix[k])}" if groups else prompt_text(rng, suffix[k])
             for k in range(count)]
    shape = f"input_tokens={input_tokens!s} output_tokens={output_tokens!s}"
    if groups:
        shape += f" prefix={groups}x{prefix_words}"
    label = f"synthetic ({shape}, {count} distinct prompts)"
    return Workload(texts, list(outs) if outs is not None else [None] * count, label, f"{shape} seed={SEED} n={count}")


def digest(workload: Workload) -> str:
    return hashlib.sha256(workload.spec.encode()).hexdigest()
