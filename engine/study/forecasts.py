"""A study's forecasts: each arm's points (scale up: 1x, 2x, 4x, ...; scale out: 1x, 1x*2, ...)
from its configs that ran OK, each config's peak with its windows' spread read from its
recording, and the larger configs predicted from them (engine/analysis/scaling_forecast.py)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Protocol

from engine.analysis.answer import Answer
from engine.analysis.scaling_forecast import (
    SCALE_OUT,
    SCALE_UP,
    ArmConfig,
    Forecast,
    Point,
    forecast_arm,
)
from engine.analysis.sound import output_rate
from engine.profiles import scale_out_parts
from engine.study.index import StudyIndex
from engine.study.variants import is_gpu_variant, variant_units


class StudyConfig(Protocol):
    """What a forecast reads of a config's figures (engine/study/figures.py's ConfigFigures)."""

    variant: str
    answer: Answer | None
    streaming: bool
    peak_windows: list[float]

    @property
    def shared_gpus(self) -> int | None: ...


def _spread(rates: Sequence[float]) -> float | None:
    """The windows' sample standard deviation; None from fewer than two windows."""
    return statistics.stdev(rates) if len(rates) >= 2 else None


def _arm_config(c: StudyConfig, status: str) -> ArmConfig:
    units = variant_units(c.variant)
    if status != "ok":
        return ArmConfig(c.variant, units, None, f"{c.variant} {status}")
    if c.shared_gpus:
        return ArmConfig(c.variant, units, None, f"{c.variant} shared {c.shared_gpus} GPU(s)")
    best = c.answer.best if c.answer is not None else None
    if best is None or output_rate(best) <= 0:
        return ArmConfig(c.variant, units, None, f"{c.variant} has no sound level")
    return ArmConfig(c.variant, units, Point(c.variant, units, output_rate(best), _spread(c.peak_windows)))


def study_forecasts(index: StudyIndex, configs: Sequence[StudyConfig]) -> list[Forecast]:
    """Each arm's larger configs predicted from its smaller ones; [] for a CPU study."""
    status = {r.variant: r.status for r in index.runs}  # the last run of each variant stands
    by_variant = {c.variant: c for c in configs}
    up: list[ArmConfig] = []
    out: list[ArmConfig] = []
    for variant in dict.fromkeys([*index.variants, *by_variant]):
        if not is_gpu_variant(variant):
            continue
        c = by_variant.get(variant)
        arm = _arm_config(c, status.get(variant, "ok")) if c is not None else ArmConfig(
            variant, variant_units(variant), None, f"{variant} did not finish")
        parts = scale_out_parts(variant)
        if parts is None:
            up.append(arm)
            if variant in ("1x", "tp1"):  # one one-GPU server: the first point of both arms
                out.append(arm)
        elif parts[0] in ("1x", "tp1"):
            out.append(arm)
    if not up and not out:
        return []
    items = "tokens" if any(c.streaming for c in configs) else "images"
    return forecast_arm(SCALE_UP, up, items) + forecast_arm(SCALE_OUT, out, items)
