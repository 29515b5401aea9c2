"""The LLM serving study's Pareto points: per config and level, output tokens/s per user (each
request's own decode rate, the median) against $ per million output tokens (the config's $/hr over
the level's output tokens/s), as vLLM's `plot_pareto` draws them, priced. A config that failed, or
has no price, has no points: it decides nothing. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.analysis.scaling import cost_per_million_tokens
from engine.study.figures import ConfigFigures


@dataclass(frozen=True)
class ParetoPoint:
    cost_mtok: float  # $ per million output tokens at this level
    per_user: float  # output tokens/s per request (median decode rate)
    stable: bool


def pareto_points(c: ConfigFigures) -> list[ParetoPoint]:
    """The config's levels as points, cheapest first; [] for a failed or unpriced config."""
    if c.failed or not c.cost_per_hour:
        return []
    out = []
    for lv in c.findings.levels:
        s = lv.result.stream
        # chunks read together leave the decode time unmeasured (StreamStats.itl_note): no per-user rate
        if s is None or not s.tokens_per_s_per_request or s.itl_note:
            continue
        cost = cost_per_million_tokens(c.cost_per_hour, s.output_tokens_per_s)
        if cost is not None:
            out.append(ParetoPoint(cost, s.tokens_per_s_per_request, lv.result.status == "stable"))
    return sorted(out, key=lambda p: p.cost_mtok)


def left_out(configs: Sequence[ConfigFigures]) -> list[str]:
    """"tp2 (failed)", "1*2 (no price)": the configs the chart leaves out, and why."""
    return [f"{c.variant} ({'failed' if c.failed else 'no price' if not c.cost_per_hour else 'per-user rate not measured'})"
            for c in configs if not pareto_points(c)]
