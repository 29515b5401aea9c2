"""A scaling study's conclusions as pure functions: per-config efficiency, the marginal gain of
each added GPU, and where to stop adding GPUs (and why).

A config has a size ("units"): the GPUs its instance groups use (1x, 2x, 4x), or on a CPU study
the CPU instances (cpu, cpu2). The throughput that decides is the one at the latency target when
the study has one (what a service can actually sell), else the peak.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from engine import format as fmt

MIN_MARGINAL = 0.5  # an added GPU must give at least half of what one GPU gives in the smallest config


@dataclass(frozen=True)
class ConfigPoint:
    variant: str
    units: int  # GPUs (or CPU instances) in the config
    throughput: float | None  # images/s at the deciding point (SLO point, else peak); None: no result
    cost_per_1000: float | None = None  # $ at that point
    not_decided: str = ""  # why no sound level gives its throughput (engine/analysis/answer.py)
    # why the config decides nothing, naming it ("2x failed (...)"): its run failed or was refused
    failed: str | None = None


@dataclass(frozen=True)
class Step:
    """Going from one config to the next larger one."""

    from_variant: str
    to_variant: str
    added_units: int
    gain_per_unit: float | None  # images/s per added GPU
    marginal: float | None  # gain_per_unit / (per-GPU throughput of the smallest config)
    cost_change: float | None  # $/1000 images, to - from


@dataclass(frozen=True)
class StopAt:
    variant: str | None  # None: no config produced a usable result
    units: int | None
    reason: str


def efficiency(throughput: float | None, units: int, base_throughput: float | None, base_units: int) -> float | None:
    """(throughput per unit) / (base throughput per unit): 1.0 is linear scaling."""
    if throughput is None or base_throughput is None or base_throughput <= 0 or units <= 0 or base_units <= 0:
        return None
    return (throughput / units) / (base_throughput / base_units)


def _ordered(configs: Sequence[ConfigPoint]) -> list[ConfigPoint]:
    return sorted(configs, key=lambda c: (c.units, c.variant))


def marginal_steps(configs: Sequence[ConfigPoint]) -> list[Step]:
    """Each step to the next larger config; a config that failed gives no figure to a step."""
    ordered = [replace(c, throughput=None, cost_per_1000=None) if c.failed else c for c in _ordered(configs)]
    if not ordered:
        return []
    base = ordered[0]
    per_unit = base.throughput / base.units if base.throughput and base.units else None
    steps = []
    for a, b in pairwise(ordered):
        added = b.units - a.units
        gain = None
        if a.throughput is not None and b.throughput is not None and added > 0:
            gain = (b.throughput - a.throughput) / added
        marginal = gain / per_unit if gain is not None and per_unit else None
        cost = b.cost_per_1000 - a.cost_per_1000 if a.cost_per_1000 is not None and b.cost_per_1000 is not None else None
        steps.append(Step(a.variant, b.variant, added, gain, marginal, cost))
    return steps


def stop_at(configs: Sequence[ConfigPoint], unit: str = "GPU", min_marginal: float = MIN_MARGINAL,
            basis: str = "peak", items: str = "images", cost_label: str = "$/1000 images") -> StopAt:
    """The largest config reached by steps that each still pay: every added unit gives at least
    ``min_marginal`` of one unit's worth in the smallest config. ``basis`` names the throughput
    in the reason ("peak", "at p99 <= 50 ms"); ``items`` what it counts and ``cost_label`` what
    a config's cost is (the training bill: "samples", "$/epoch"). A config that failed leaves it
    not decided."""
    ordered = _ordered(configs)
    failed = [c.failed for c in ordered if c.failed]
    if failed:  # a config that failed may have been the one to stop at, or the step that pays
        return StopAt(None, None, f"not decided: {'; '.join(failed)}")
    usable = [c for c in ordered if c.throughput is not None and c.throughput > 0]
    undecided = [f"{c.variant}: {c.not_decided}" for c in ordered if c not in usable and c.not_decided]
    if not usable:
        if undecided:
            return StopAt(None, None, f"not decided: {'; '.join(undecided)}")
        return StopAt(None, None, f"no config produced a usable result ({basis})")
    current = usable[0]
    skipped = [c.variant for c in ordered if c.units <= current.units and c not in usable and not c.not_decided]
    lead = f"{', '.join(skipped)} gave no usable result ({basis}); " if skipped else ""
    lead += "".join(f"{c.variant} not decided ({c.not_decided}); " for c in ordered
                    if c.units <= current.units and c not in usable and c.not_decided)
    steps = {(s.from_variant, s.to_variant): s for s in marginal_steps(usable)}
    for nxt in usable[1:]:
        step = steps[(current.variant, nxt.variant)]
        if step.marginal is None or step.marginal < min_marginal:
            plural = "s" if current.units != 1 else ""
            gain = f"{step.gain_per_unit:+,.0f}" if step.gain_per_unit is not None else "n/a"
            cost = ""
            if current.cost_per_1000 is not None and nxt.cost_per_1000 is not None:
                cost = (f"; {cost_label} goes from {fmt.money(current.cost_per_1000)} to "
                        f"{fmt.money(nxt.cost_per_1000)}")
            share = f"{step.marginal * 100:.0f} %" if step.marginal is not None else "n/a"
            return StopAt(current.variant, current.units,
                          f"{lead}stop at {current.units} {unit}{plural}: going to {nxt.variant} adds {gain} {items}/s "
                          f"per added {unit} ({basis}), {share} of what one {unit} gives in {usable[0].variant} "
                          f"(below {min_marginal * 100:.0f} %){cost}")
        current = nxt
    if len(usable) < len(ordered) and ordered[-1] is not current:
        above = [c for c in ordered if c.units > current.units and (c.throughput is None or c.throughput <= 0)]
        missing = [c.variant for c in above if not c.not_decided]
        noisy = [f"{c.variant} not decided ({c.not_decided})" for c in above if c.not_decided]
        if above:
            plural = "s" if current.units != 1 else ""
            why = [f"{', '.join(missing)} gave no usable result ({basis})"] if missing else []
            return StopAt(current.variant, current.units,
                          f"{lead}stop at {current.units} {unit}{plural}: {'; '.join(why + noisy)}")
    plural = "s" if current.units != 1 else ""
    if len(usable) > 1:
        # the figures of the last step, not only "at least 50 %": a step just over the bar and a
        # linear one read the same otherwise, and the cost per image may have risen all along
        last = steps[(usable[-2].variant, current.variant)]
        assert last.gain_per_unit is not None and last.marginal is not None  # it passed the bar above
        more = (f"every step still paid; the last one ({last.from_variant} -> {last.to_variant}) "
                f"adds {last.gain_per_unit:+,.0f} {items}/s per added {unit} ({basis}), "
                f"{last.marginal * 100:.0f} % of what one {unit} gives in {usable[0].variant} "
                f"(the bar: {min_marginal * 100:.0f} %)")
        if usable[0].cost_per_1000 is not None and current.cost_per_1000 is not None:
            more += (f"; {cost_label} goes from {fmt.money(usable[0].cost_per_1000)} in {usable[0].variant} "
                     f"to {fmt.money(current.cost_per_1000)} in {current.variant}")
    else:
        more = f"it is the only config with a result ({basis})"
    return StopAt(current.variant, current.units,
                  f"{lead}stop at {current.units} {unit}{plural}, the largest config measured, with no limit found: "
                  f"{more}; measure a larger config to find the limit")
