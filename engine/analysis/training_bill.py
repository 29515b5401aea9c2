"""The training bill: per world size, the time and the dollars one epoch costs, with the probe's
95 % CI carried through, and the largest world size worth paying for (the study's stop rule).

An epoch is ``dataset_size`` samples at the measured samples/s. N GPUs pay their share of the
box (N of its G GPUs, pro rata, as the study prices a config), whole boxes past G; where the box's
GPU count is not known (a CPU box, a probe run without a profile) every world size pays the box.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from engine import format as fmt
from engine.analysis.study import ConfigPoint, StopAt, stop_at
from engine.events import ProbeResult, StatSummary

DATASET_KEY = "probe.dataset_size"
PRICE_KEY = "hardware.cost_per_hour"


@dataclass(frozen=True)
class Interval:
    """A figure and its 95 % CI; a bound is None where it is not known or not bounded."""

    mean: float
    low: float | None
    high: float | None


@dataclass(frozen=True)
class BillRow:
    result: ProbeResult  # the measurement (world size 1 may be a torchrun run's baseline)
    epoch_s: Interval | None  # None: no dataset size
    price_per_hour: float | None  # what this world size pays; None: no price
    cost: Interval | None  # $ per epoch


@dataclass(frozen=True)
class Stop:
    label: str  # the configuration: "mlp_6.9m ddp weak b32"
    stop: StopAt


@dataclass(frozen=True)
class TrainingBill:
    rows: list[BillRow]  # every world size of every configuration, once
    stops: list[Stop]  # per configuration and strategy: the largest world size worth paying for
    missing: str | None  # one line: what to set for what is not shown
    pricing: str | None  # one line: how a world size is priced

    @property
    def has_epochs(self) -> bool:
        return any(r.epoch_s is not None for r in self.rows)

    @property
    def has_cost(self) -> bool:
        return any(r.cost is not None for r in self.rows)


def reciprocal_interval(numerator: float, rate: StatSummary) -> Interval | None:
    """numerator / rate with its CI. x -> c/x decreases, so the bounds swap: the low end comes
    from the rate's high bound and the high end from its low bound. A rate bound at or below 0
    leaves that end unbounded (None). None: the mean rate is not positive."""
    if rate.mean <= 0 or not math.isfinite(rate.mean):
        return None
    low = numerator / rate.ci_high if rate.ci_high is not None and rate.ci_high > 0 else None
    high = numerator / rate.ci_low if rate.ci_low is not None and rate.ci_low > 0 else None
    return Interval(numerator / rate.mean, low, high)


def scaled(interval: Interval, factor: float) -> Interval:
    """A positive factor keeps the bounds where they are."""
    return Interval(interval.mean * factor,
                    None if interval.low is None else interval.low * factor,
                    None if interval.high is None else interval.high * factor)


def price_for(world_size: int, cost_per_hour: float, box_gpus: int) -> float:
    """$/hr for ``world_size`` GPUs: their share of a box of ``box_gpus``, whole boxes past it;
    the box when its GPU count is unknown (0)."""
    if box_gpus <= 0:
        return cost_per_hour
    if world_size <= box_gpus:
        return cost_per_hour * world_size / box_gpus
    return cost_per_hour * math.ceil(world_size / box_gpus)


def _profile_batch(r: ProbeResult) -> int:
    """The profile's batch a result answers for: per device (weak) or global (strong)."""
    return r.global_batch if r.scaling == "strong" else r.per_device_batch


def _baseline_row(r: ProbeResult) -> ProbeResult | None:
    """A torchrun run's world-size-1 figures (from --baseline) as a world-size-1 result."""
    if r.baseline_samples_per_s is None:
        return None
    step = StatSummary(mean=r.baseline_step_time_s or 0.0, ci_low=None, ci_high=None, n=r.baseline_samples_per_s.n)
    return msgspec.structs.replace(r, strategy="single", world_size=1, per_device_batch=_profile_batch(r), global_batch=_profile_batch(r),
                   samples_per_s=r.baseline_samples_per_s, step_time_s=step, speedup=1.0, efficiency=1.0,
                   comm_overhead=None, peak_mem_bytes=[], gpu_util=list(r.baseline_gpu_util), p_value=None,
                   significant=None, baseline_samples_per_s=None, baseline_step_time_s=None, baseline_gpu_util=[])


MAX_CI_HALF_WIDTH = 0.20  # of the mean: repeats that disagree more than this decide no stop


def unsound_rate(rate: StatSummary) -> str:
    """Why a world size's samples/s decides nothing ("" when it may): its repeats disagree (the
    95 % CI's half-width over MAX_CI_HALF_WIDTH of the mean), or it measured no throughput. A
    single repeat (no CI) is taken as measured: the bill says when there is no CI."""
    if not rate.mean > 0:
        return "no throughput measured"
    if rate.ci_low is not None and rate.ci_high is not None:
        half = (rate.ci_high - rate.ci_low) / 2
        if half > MAX_CI_HALF_WIDTH * rate.mean:
            return (f"its repeats disagree (95 % CI ±{half / rate.mean * 100:.0f} % of the mean, over "
                    f"{MAX_CI_HALF_WIDTH * 100:.0f} %): measure again with more repeats (probe.repeats)")
    return ""


def _missing_line(dataset_size: int | None, cost_per_hour: float | None, keys: tuple[str, str]) -> str | None:
    data_key, price_key = keys
    if not dataset_size and not cost_per_hour:
        return f"set {data_key} (samples per epoch) and {price_key} for the time and $ per epoch"
    if not dataset_size:
        return f"set {data_key} (samples per epoch) for the time and $ per epoch"
    if not cost_per_hour:
        return f"set {price_key} for the $ per epoch"
    return None


def _pricing_line(cost_per_hour: float, box_gpus: int, unit: str) -> str:
    if box_gpus <= 0:
        return f"priced at ${cost_per_hour:g}/hr, the whole box at every world size"
    return (f"priced at ${cost_per_hour:g}/hr for the box of {box_gpus} {unit}{'s' if box_gpus != 1 else ''}: "
            f"{fmt.money(cost_per_hour / box_gpus)}/hr per {unit}, pro rata")


def training_bill(results: Sequence[ProbeResult], dataset_size: int | None, cost_per_hour: float | None,
                  box_gpus: int = 0, keys: tuple[str, str] = (DATASET_KEY, PRICE_KEY)) -> TrainingBill:
    """The bill of a probe's results. ``keys`` names what the user sets for the dataset size and
    the price (profile keys, or a command's flags) in the line that asks for them."""
    dataset = dataset_size if dataset_size and dataset_size > 0 else None
    price = cost_per_hour if cost_per_hour and cost_per_hour > 0 else None
    unit = "GPU" if any(r.device == "cuda" for r in results) or not results else "rank"
    groups: dict[tuple[str, str, str, int], list[ProbeResult]] = {}
    for r in results:
        groups.setdefault((r.model, r.precision, r.scaling, _profile_batch(r)), []).append(r)
    rows: list[BillRow] = []
    stops: list[Stop] = []
    for (model, _precision, scaling, work), members in groups.items():
        singles = [r for r in members if r.world_size == 1][-1:]  # a re-run replaces the older result
        multis = [r for r in members if r.world_size > 1]
        if not singles:
            singles = [b for b in (_baseline_row(r) for r in multis) if b is not None][:1]
        strategies = list(dict.fromkeys(r.strategy for r in multis)) or [singles[0].strategy if singles else "single"]
        for strategy in strategies:
            latest: dict[int, ProbeResult] = {r.world_size: r for r in singles}
            latest.update({r.world_size: r for r in multis if r.strategy == strategy})
            points = []
            for n, r in sorted(latest.items()):
                row = _bill_row(r, dataset, price, box_gpus)
                if all(row.result is not other.result for other in rows):
                    rows.append(row)
                shaky = unsound_rate(r.samples_per_s)
                points.append(ConfigPoint(variant=f"{n}x", units=n, throughput=None if shaky else r.samples_per_s.mean,
                                          cost_per_1000=row.cost.mean if row.cost else None,
                                          not_decided=f"world size {n}: {shaky}" if shaky else ""))
            label = f"{model} {strategy} {scaling} b{work}"
            stops.append(Stop(label, stop_at(points, unit=unit, basis="mean samples/s", items="samples",
                                             cost_label="$/epoch")))
    return TrainingBill(rows=rows, stops=stops, missing=_missing_line(dataset, price, keys) if results else None,
                        pricing=_pricing_line(price, box_gpus, unit) if price and dataset and rows else None)


def _bill_row(r: ProbeResult, dataset: int | None, price: float | None, box_gpus: int) -> BillRow:
    epoch = reciprocal_interval(float(dataset), r.samples_per_s) if dataset else None
    per_hour = price_for(r.world_size, price, box_gpus) if price else None
    cost = scaled(epoch, per_hour / 3600.0) if epoch is not None and per_hour is not None else None
    return BillRow(result=r, epoch_s=epoch, price_per_hour=per_hour, cost=cost)
