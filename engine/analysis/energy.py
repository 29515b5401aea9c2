"""Energy per image from cumulative energy counters (NVML's total-energy counter, or Triton's
nv_energy_consumption) sampled over a run: the counter's increase over the measured window,
read by linear interpolation between the samples around the window's ends, divided by the
images completed in it. A counter that went backwards (a restarted server's Triton counter) or
samples that do not cover the window give None, never a guess."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

Series = Sequence[tuple[float, float]]  # (UNIX seconds, joules), ascending time


def counter_at(series: Series, t: float) -> float | None:
    """The counter at time t, interpolated between the samples either side (None outside)."""
    if not series or t < series[0][0] or t > series[-1][0]:
        return None
    i = bisect_left([ts for ts, _ in series], t)
    ts1, e1 = series[i]
    if ts1 == t or i == 0:
        return e1
    ts0, e0 = series[i - 1]
    return e0 + (e1 - e0) * (t - ts0) / (ts1 - ts0)


def energy_between(series: Series, t0: float, t1: float) -> float | None:
    """Joules used by one device between t0 and t1."""
    start, end = counter_at(series, t0), counter_at(series, t1)
    if start is None or end is None or end < start:
        return None
    return end - start


def config_gpus(model_config: Mapping[str, Any]) -> set[int] | None:
    """GPU indices the config's instance groups name; None: all GPUs (KIND_GPU without a list,
    or KIND_MODEL: the backend places the model itself, as vLLM and TensorRT-LLM spread one
    tensor-parallel model over the GPUs)."""
    found: set[int] = set()
    for group in model_config.get("instance_group") or []:
        if group.get("kind") in ("KIND_GPU", "KIND_AUTO", "KIND_MODEL") and not group.get("gpus"):
            return None
        found.update(int(x) for x in group.get("gpus") or [])
    return found


def joules_per_token(gpu_watts: Mapping[str, float], tokens_per_s: float) -> float | None:
    """Energy per output token at a level from its GPUs' mean power (W = J/s) over the level's
    span: the GPUs' watts together over the tokens/s. None without power samples (a CPU run)."""
    if not gpu_watts or tokens_per_s <= 0:
        return None
    return sum(gpu_watts.values()) / tokens_per_s


def joules_per_image(devices: Mapping[str, Series], t0: float, t1: float, images: float) -> float | None:
    """Summed over the devices the config uses; None when any of them lacks the window."""
    if not devices or images <= 0 or t1 <= t0:
        return None
    total = 0.0
    for series in devices.values():
        joules = energy_between(series, t0, t1)
        if joules is None:
            return None
        total += joules
    return total / images
