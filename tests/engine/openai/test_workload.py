"""The synthetic workloads an OpenAI sweep generates: lengths that follow their stated
distribution (within the tolerance each test states), prompts distinct from their first words so
that no cache hit is an accident, shared-prefix groups, and one line for a bad spec."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from engine.length_spec import parse_length
from engine.openai.requests import synthetic

N = 4000  # draws per distribution: the sample mean's standard error is then under 2 % of the sd


@pytest.mark.parametrize(("text", "mean", "sd"), [
    ("128", 128, 0.0),
    ("128+-32", 128, 64 / math.sqrt(12)),  # uniform over 96..160
    ("uniform:50:150", 100, 100 / math.sqrt(12)),
    ("normal:200:40", 200, 40),
    ("lognormal:128:0.5", 128 * math.exp(0.125), 128 * math.exp(0.125) * math.sqrt(math.exp(0.25) - 1)),
])
def test_each_distribution_draws_its_mean_and_spread(text: str, mean: float, sd: float) -> None:
    spec = parse_length(text)
    assert spec is not None
    drawn = spec.draw(random.Random(1), N)
    # tolerance: mean within 3 % (and 1 word of rounding), sd within 8 %: several standard errors at N
    assert statistics.fmean(drawn) == pytest.approx(mean, rel=0.03, abs=1)
    assert statistics.pstdev(drawn) == pytest.approx(sd, rel=0.08, abs=0.5)
    if text.startswith("lognormal"):
        assert statistics.median(drawn) == pytest.approx(128, rel=0.05)  # the spec's first figure is the median


@pytest.mark.parametrize("text", ["lognormal:abc", "normal:100:200", "uniform:9:3", "0", "128+-200", "gamma:1:2",
                                  "lognormal:128:9", True])
def test_a_bad_spec_is_none(text: object) -> None:
    assert parse_length(text) is None


def test_prompts_are_distinct_from_their_first_words() -> None:
    made = synthetic("normal:64:8", "16", 2048)
    assert len(made.prompts) == 2048
    openings = {" ".join(p.text.split()[:12]) for p in made.prompts}
    assert len(openings) == 2048  # no two share even their first 12 words: nothing for a prefix cache to find
    assert made.label == "synthetic (input_tokens=normal:64:8 output_tokens=16, 2048 distinct prompts)"


def test_prefix_groups_share_their_prefix_and_nothing_else() -> None:
    made = synthetic("16", "8", 40, groups=4, prefix_words=100)
    words = [p.text.split() for p in made.prompts]
    assert all(len(w) == 116 for w in words)
    for k, w in enumerate(words):
        assert w[:100] == words[k % 4][:100]  # its group's prefix
    assert len({" ".join(w[:100]) for w in words}) == 4  # four prefixes
    assert len({" ".join(w[100:]) for w in words}) == 40  # each suffix its own
    assert "prefix=4x100" in made.label


def test_an_empirical_histogram_draws_each_length_with_its_share(tmp_path) -> None:
    hist = tmp_path / "lengths.csv"
    hist.write_text("# length,count\n100,50\n400 30\n2000,20\n")
    spec = parse_length(f"empirical:{hist}")
    assert spec is not None and spec.mean == pytest.approx(100 * 0.5 + 400 * 0.3 + 2000 * 0.2)
    drawn = spec.draw(random.Random(2), N)
    shares = {n: drawn.count(n) / N for n in (100, 400, 2000)}
    # tolerance: each share within 0.03 (over 3 standard errors at N = 4000)
    assert shares == pytest.approx({100: 0.5, 400: 0.3, 2000: 0.2}, abs=0.03)
    assert set(drawn) == {100, 400, 2000}


def test_a_bad_histogram_names_its_line(tmp_path) -> None:
    from engine.length_spec import length_problem

    hist = tmp_path / "bad.csv"
    hist.write_text("100,5\n0,3\n")
    assert parse_length(f"empirical:{hist}") is None
    problem = length_problem(f"empirical:{hist}")
    assert problem is not None and "line 2 is '0,3'" in problem and "\n" not in problem
    assert "cannot read" in (length_problem(f"empirical:{tmp_path / 'missing.csv'}") or "")
