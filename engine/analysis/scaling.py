"""Scaling and cost arithmetic shared by the load engine, the probe and the reports."""

from __future__ import annotations


def speedup(throughput_n: float, throughput_1: float) -> float | None:
    """How many times faster N devices are than one (same model, same per-device work)."""
    if throughput_1 <= 0:
        return None
    return throughput_n / throughput_1


def scaling_efficiency(throughput_n: float, throughput_1: float, n: int) -> float | None:
    """Weak scaling: throughput_N / (N x throughput_1). 1.0 is perfect linear scaling."""
    if throughput_1 <= 0 or n <= 0:
        return None
    return throughput_n / (n * throughput_1)


def cost_per_million_tokens(cost_per_hour: float, tokens_per_s: float) -> float | None:
    """Dollars per million output tokens at a sustained rate: $/hr / (tokens/s x 3600) x 10^6."""
    if tokens_per_s <= 0 or cost_per_hour <= 0:
        return None
    return cost_per_hour / (tokens_per_s * 3600.0) * 1e6


def cost_per_1000(cost_per_hour: float, items_per_s: float) -> float | None:
    """Dollars per 1000 items (images, samples) at a sustained rate:
    $/hr / (items/s x 3600) x 1000."""
    if items_per_s <= 0 or cost_per_hour <= 0:
        return None
    return cost_per_hour / (items_per_s * 3600.0) * 1000.0
