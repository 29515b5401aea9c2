"""Synthetic text prompts of given lengths, for any API that takes text (Triton's text models,
OpenAI's completions): load.input_tokens and load.output_tokens as a list of (prompt, output
length) made the same way every run.

A prompt of n tokens is n words of a fixed vocabulary (a word a token, as a word-level tokenizer
counts them; a model's own tokenizer may count a few more). Each length is drawn from the
profile's distribution (engine/length_spec.py: fixed, uniform, normal, lognormal) with a fixed
seed, so that two runs send the same prompts. Standard library only.
"""

from __future__ import annotations

import random

from engine.errors import UserError
from engine.length_spec import SYNTAX as LENGTH_SYNTAX
from engine.profiles import token_count

DEFAULT_WORDS = 8  # a prompt's words when load.input_tokens is not set
ENTRIES = 64  # distinct prompts when a length has a spread (one without)
SEED = 42
WORDS = ("the", "river", "stone", "light", "morning", "garden", "window", "quiet", "paper", "yellow", "market",
         "winter", "music", "silver", "forest", "letter", "bridge", "summer", "orange", "valley", "story", "cloud",
         "engine", "harbor", "lantern", "meadow", "pocket", "rabbit", "signal", "thunder", "velvet", "whistle")


def lengths(text: object, key: str, count: int, rng: random.Random) -> list[int]:
    """``count`` lengths for the profile's ``key`` ("128", "128+-32", "lognormal:128:0.5", ...)."""
    parsed = token_count(text)
    if parsed is None:  # the profile's check refuses it first; a caller passing its own text gets the line too
        raise UserError(f"load.{key}: expected {LENGTH_SYNTAX}, found {text!r}")
    return parsed.draw(rng, count)


def entry_count(input_tokens: object, output_tokens: object) -> int:
    """How many distinct prompts: ENTRIES when either length varies, else one."""
    parsed = [token_count(t) for t in (input_tokens, output_tokens) if t != ""]
    return ENTRIES if any(p is not None and p.varies for p in parsed) else 1


def prompt_text(rng: random.Random, words: int) -> str:
    """One prompt of ``words`` words of WORDS."""
    return " ".join(WORDS[rng.randrange(len(WORDS))] for _ in range(words))


def synthetic_prompts(input_tokens: object, output_tokens: object) -> list[tuple[str, int | None]]:
    """The prompts and each one's output length (None: load.output_tokens not set); either
    length may be "" (a prompt of DEFAULT_WORDS words)."""
    count = entry_count(input_tokens, output_tokens)
    rng = random.Random(SEED)
    words = lengths(input_tokens, "input_tokens", count, rng) if input_tokens != "" else [DEFAULT_WORDS] * count
    outs = lengths(output_tokens, "output_tokens", count, rng) if output_tokens != "" else None
    return [(prompt_text(rng, words[k]), outs[k] if outs is not None else None) for k in range(count)]


def synthetic_label(input_tokens: object, output_tokens: object) -> tuple[str, str]:
    """(what the recording calls these prompts, the text their sha256 is of)."""
    count = entry_count(input_tokens, output_tokens)
    spec = f"input_tokens={input_tokens!s} output_tokens={output_tokens!s} seed={SEED} entries={count}"
    label = (f"synthetic ({spec.split(' seed')[0]})" if input_tokens != "" or output_tokens != ""
             else f"synthetic text prompts ({DEFAULT_WORDS} words; load.input_tokens sets the length)")
    return label, spec
