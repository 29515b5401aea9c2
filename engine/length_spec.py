"""A length distribution as the profile writes it (load.input_tokens, load.output_tokens), and
its draws: what an LLM workload's prompt and answer lengths follow.

- ``128``: every length 128 (fixed);
- ``128+-32`` (or ``128±32``) or ``uniform:96:160``: uniform over the whole numbers between;
- ``normal:128:32``: mean 128, standard deviation 32;
- ``lognormal:128:0.5``: median 128, sigma 0.5 of the log (a long right tail, as chat prompts have);
- ``empirical:PATH``: an empirical histogram, a file of ``length,count`` lines (or ``length count``;
  ``#`` comments), each length drawn with its count's share.

Draws are rounded to whole numbers and clipped to 1..MOST_TOKENS (a normal's left tail below 1
becomes 1: keep the deviation well under the mean). Standard library only.
"""

from __future__ import annotations

import math
import os
import random
import re
from dataclasses import dataclass

MOST_TOKENS = 1 << 20
SYNTAX = ("a length from 1 to 1048576: 128, '128+-32' or 'uniform:96:160' (uniform), 'normal:128:32' "
          "(mean:sd), 'lognormal:128:0.5' (median:sigma) or 'empirical:FILE' (length,count lines)")
MAX_HISTOGRAM_BYTES = 8 << 20
_SPREAD = re.compile(r"^\s*([0-9]+)\s*(?:(?:\+-|±)\s*([0-9]+))?\s*$")
_NAMED = re.compile(r"^\s*(uniform|normal|lognormal)\s*:\s*([0-9.eE+-]+)\s*:\s*([0-9.eE+-]+)\s*$")


@dataclass(frozen=True)
class LengthSpec:
    kind: str  # "fixed", "uniform", "normal", "lognormal" or "empirical"
    a: float  # fixed: the length; uniform: low; normal: mean; lognormal: median; empirical: 0
    b: float = 0.0  # uniform: high; normal: sd; lognormal: sigma; empirical: 0
    lengths: tuple[int, ...] = ()  # empirical: the histogram's lengths
    counts: tuple[float, ...] = ()  # and their counts

    @property
    def varies(self) -> bool:
        return self.kind != "fixed"

    @property
    def mean(self) -> float:
        """The distribution's mean (before rounding and clipping)."""
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        if self.kind == "lognormal":
            return self.a * math.exp(self.b * self.b / 2)
        if self.kind == "empirical":
            return sum(n * c for n, c in zip(self.lengths, self.counts, strict=True)) / sum(self.counts)
        return self.a

    def draw(self, rng: random.Random, count: int) -> list[int]:
        if self.kind == "empirical":
            return rng.choices(self.lengths, weights=self.counts, k=count)
        return [self._one(rng) for _ in range(count)]

    def _one(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            value = self.a
        elif self.kind == "uniform":
            value = rng.randint(int(self.a), int(self.b))
        elif self.kind == "normal":
            value = rng.gauss(self.a, self.b)
        else:
            value = rng.lognormvariate(math.log(self.a), self.b)
        return max(1, min(MOST_TOKENS, round(value)))


def parse_length(v: object) -> LengthSpec | None:
    """The spec ``v`` writes; None for a value that is none (SYNTAX says what is)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        v = str(v)
    if not isinstance(v, str):
        return None
    if (m := _SPREAD.match(v)) is not None:
        mean, spread = int(m.group(1)), int(m.group(2) or 0)
        if not 1 <= mean <= MOST_TOKENS or spread >= mean:
            return None
        return LengthSpec("uniform", mean - spread, mean + spread) if spread else LengthSpec("fixed", mean)
    if v.strip().startswith("empirical:"):
        found = _empirical(v.strip()[len("empirical:"):])
        return found if isinstance(found, LengthSpec) else None
    if (m := _NAMED.match(v)) is None:
        return None
    try:
        a, b = float(m.group(2)), float(m.group(3))
    except ValueError:
        return None
    if not (math.isfinite(a) and math.isfinite(b) and 1 <= a <= MOST_TOKENS):
        return None
    kind = m.group(1)
    if kind == "uniform" and (a != int(a) or b != int(b) or not a <= b <= MOST_TOKENS):
        return None
    if kind == "normal" and not 0 <= b <= a:  # beyond that, clipping at 1 would move the mean
        return None
    if kind == "lognormal" and not 0 <= b <= 3:
        return None
    return LengthSpec(kind, a, b)



def length_problem(v: object) -> str | None:
    """What is wrong with ``v`` as a length, in one line (None: nothing); an empirical file's
    problem names its line."""
    if isinstance(v, str) and v.strip().startswith("empirical:"):
        found = _empirical(v.strip()[len("empirical:"):])
        return found if isinstance(found, str) else None
    return None if parse_length(v) is not None else SYNTAX


def _empirical(path: str) -> LengthSpec | str:
    """The histogram file's lengths and counts, or what is wrong with it (one line)."""
    try:
        with open(os.path.expanduser(path), "rb") as f:
            raw = f.read(MAX_HISTOGRAM_BYTES + 1)
    except OSError as exc:
        return f"an empirical histogram file: cannot read {path}: {exc.strerror or exc}"
    if len(raw) > MAX_HISTOGRAM_BYTES:
        return f"an empirical histogram file under {MAX_HISTOGRAM_BYTES >> 20} MiB: {path} is larger"
    lengths: list[int] = []
    counts: list[float] = []
    for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), start=1):
        text = line.split("#", 1)[0].replace(",", " ").split()
        if not text:
            continue
        try:
            n, c = int(text[0]), float(text[1]) if len(text) == 2 else math.nan
        except ValueError:
            n, c = 0, math.nan
        if not 1 <= n <= MOST_TOKENS or not (math.isfinite(c) and c >= 0):
            return f"'length,count' lines in {path} (a length from 1 to {MOST_TOKENS}, a count >= 0): line {number} is {line.strip()[:40]!r}"
        lengths.append(n)
        counts.append(c)
    if not lengths or sum(counts) <= 0:
        return f"an empirical histogram with some count in {path}: it has none"
    return LengthSpec("empirical", 0, 0, tuple(lengths), tuple(counts))
