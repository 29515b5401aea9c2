"""The wire's ceiling against the model: what the request path alone carries, what the model's
instances would do by Triton's own compute times, and whether the request path is the limit.

The wire check (engine/wire_check.py, ``--wire``) sends the model-under-test's bytes per item to the
no-compute ``wire`` model at the sweep's levels, with the same transport and batch size. Its peak
is the request path's ceiling (client, HTTP body or shared memory, Triton's front end and
batcher, the backend's hand-over). The model's instances' capacity comes from the main sweep's
server statistics at its peak level: every instance running back to back at the batch size and
execution time Triton measured there. Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine import format as fmt
from engine.analysis.answer import decide
from engine.analysis.saturation import saturation_point
from engine.events import LevelResult, ServerBreakdown, WireCeiling, WireLevel
from engine.modes import mode_of
from engine.transport_table import transport_spec

NEAR_WIRE = 0.15  # the model's peak this close to the wire's: the request path is the limit
FP32_BYTES = 4

def wire_elements(bytes_per_item: int) -> int:
    """FP32 elements per item that carry at least ``bytes_per_item`` bytes (at least one)."""
    return max(1, math.ceil(bytes_per_item / FP32_BYTES))


def level_text(mode: str, level: float) -> str:
    return mode_of(mode).level_text(level)


def wire_ceiling(
    model: str, transport: str, batch_size: int, bytes_per_item: int, approximated: bool,
    results: Sequence[LevelResult], mode: str = "concurrency", wire_model: str = "wire",
) -> WireCeiling:
    """The WireCeiling event of a wire sweep's level results. Its peak and saturation follow the
    model's rule (engine/analysis/answer.py): sound levels only, noise decides nothing."""
    answer = decide(results)
    levels = [
        WireLevel(level=float(r.level), status=r.status, throughput_ips=r.throughput_ips,
                  throughput_rps=r.throughput_rps, p50=r.latency.p50, p99=r.latency.p99, errors=r.errors,
                  client_bound=r.audit.client_bound)
        for r in answer.levels
    ]
    best = answer.best
    # a client-bound level measured the load generator: never where the wire saturates
    sat = saturation_point([(float(r.level), r.throughput_ips) for r in answer.sound if not r.audit.client_bound])
    elements = wire_elements(bytes_per_item)
    return WireCeiling(
        model=model, transport=transport, batch_size=batch_size, bytes_per_item=bytes_per_item,
        request_bytes=batch_size * elements * FP32_BYTES, input_shape=[elements], approximated=approximated,
        wire_model=wire_model, mode=mode, levels=levels,
        peak_ips=best.throughput_ips if best else None, peak_level=float(best.level) if best else None,
        peak_client_bound=best.audit.client_bound if best else False,
        saturated=bool(sat and sat.reached),
        # levels that ran and decide nothing (a failed one is a result: none)
        not_decided=answer.not_decided if any(r.status != "failed" for r in answer.levels) else "",
    )


# ----------------------------------------------------------------------------- the GPUs' side


def model_instances(model_config: dict[str, Any], gpus: int | None = None) -> int | None:
    """Model instances in a Triton model configuration (its /config JSON): each instance_group's
    count, times its GPUs for KIND_GPU. A GPU group without a gpus list (Triton normally fills
    it) counts ``gpus`` GPUs. None when the config does not say."""
    groups = model_config.get("instance_group") if isinstance(model_config, dict) else None
    if not isinstance(groups, list) or not groups:
        return None
    total = 0
    for group in groups:
        if not isinstance(group, dict):
            return None
        count = group.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            return None
        if group.get("kind") == "KIND_GPU":
            listed = group.get("gpus")
            n = len(listed) if isinstance(listed, list) and listed else gpus
            if not n:
                return None
            total += count * n
        else:
            total += count
    return total or None


@dataclass(frozen=True)
class Capacity:
    """What the model's instances would do if each ran back to back at the batch size and the
    execution time Triton measured at ``level``."""

    images_per_s: float
    instances: int
    avg_batch: float  # items per execution
    compute_infer_s: float  # seconds per execution
    level: float

    def describe(self, mode: str = "concurrency") -> str:
        return (f"the model's {self.instances} instance{'s' if self.instances != 1 else ''} would do "
                f"{fmt.rate(self.images_per_s)} images/s (from Triton's compute times: {self.instances} x "
                f"avg batch {self.avg_batch:.3g} / {self.compute_infer_s * 1000:.3g} ms compute infer per "
                f"execution at {level_text(mode, self.level)})")


def instance_capacity(instances: int | None, server: ServerBreakdown | None, level: float) -> Capacity | None:
    """instances x average batch / compute_infer time per execution.

    Triton reports each request's compute_infer as the duration of the execution (batch) it was
    part of, so the per-request average of engine.triton.server_stats.breakdown is the time per
    execution (weighted by requests); avg_batch_size is inference_count / execution_count, in
    items. None where a figure is missing."""
    if not instances or server is None:
        return None
    batch, infer = server.avg_batch_size, server.compute_infer
    if not batch or not infer or batch <= 0 or infer <= 0:
        return None
    return Capacity(instances * batch / infer, instances, batch, infer, float(level))


# ----------------------------------------------------------------------------- the comparison


def wire_is_the_limit(model_peak_ips: float | None, wire: WireCeiling) -> bool:
    """The model's peak within NEAR_WIRE of a wire ceiling that was measured for real: the wire
    saturated within its levels and its peak was not the load generator's limit."""
    if model_peak_ips is None or not wire.peak_ips or not wire.saturated or wire.peak_client_bound:
        return False
    return model_peak_ips >= (1 - NEAR_WIRE) * wire.peak_ips


def carries(wire: WireCeiling) -> str:
    """"the HTTP path caps at 10.1k images/s with 602 KB requests" (or why it is a lower bound)."""
    spec = transport_spec(wire.transport)
    path, size = spec.path, f"{fmt.body_size(wire.request_bytes)} {spec.request_noun}"
    if wire.peak_ips is None and not wire.not_decided:  # no level measured, or every one failed
        return f"{path} gave no result with {size}"
    if wire.peak_ips is None:
        return f"{path}: not decided with {size} ({wire.not_decided})"
    verb = "caps at" if wire.saturated and not wire.peak_client_bound else "carried at least"
    return f"{path} {verb} {fmt.rate(wire.peak_ips)} images/s with {size}"


def request_path_line(wire: WireCeiling, model_peak_ips: float | None, capacity: Capacity | None,
                      model_not_decided: str = "") -> str:
    """The one line a report, the headless output and the TUI's log say about the wire.
    ``model_not_decided``: why the model has no peak (no sound level), said where it has none."""
    gpus = f"; {capacity.describe(wire.mode)}" if capacity is not None else ""
    if wire_is_the_limit(model_peak_ips, wire):
        return f"the request path is the limit: {carries(wire)}{gpus}"
    text = carries(wire)
    if model_peak_ips is not None and wire.peak_ips:
        text += f"; the model peaked at {fmt.rate(model_peak_ips)} images/s ({fmt.percent(model_peak_ips / wire.peak_ips)} of it)"
    elif model_peak_ips is None and model_not_decided:
        text += f"; the model's peak is not decided ({model_not_decided})"
    if wire.peak_client_bound:
        text += "; the wire's peak was client-bound: the path carries more than measured"
    elif not wire.saturated and wire.peak_ips is not None:
        text += "; still rising at the highest level: the path's ceiling is higher"
    return text + gpus


def wire_notes(wire: WireCeiling) -> list[str]:
    """What the reader must know to read the wire's figures right."""
    notes = [(f"{wire.bytes_per_item:,} bytes per item of {wire.model}'s input sent as FP32 "
              f"{wire.wire_model}.INPUT0 {wire.input_shape} x batch {wire.batch_size}")]
    if wire.approximated:
        notes.append(f"{wire.model}'s input is not one FP32 tensor: the wire carries the same bytes "
                     "as FP32 (approximated by bytes)")
    return notes


@dataclass(frozen=True)
class Assessment:
    """The wire against one sweep of the model."""

    line: str  # request_path_line
    at_limit: bool  # wire_is_the_limit
    model_peak_ips: float | None
    model_peak_level: float | None
    capacity: Capacity | None  # at the model's peak level


def assess(wire: WireCeiling, results: Sequence[LevelResult], model_config: dict[str, Any],
           gpus: int | None = None) -> Assessment:
    """``results``: the model's sweep, whose peak is the answer's (sound levels only);
    ``model_config``: Triton's config JSON of the model (its instance groups); ``gpus``: GPUs a
    KIND_GPU group without a gpus list spreads over."""
    answer = decide(results)
    best = answer.best
    capacity = instance_capacity(model_instances(model_config, gpus), best.server, best.level) if best else None
    peak_ips = best.throughput_ips if best else None
    line = request_path_line(wire, peak_ips, capacity, answer.not_decided)
    if best is not None and capacity is None and best.server is None:
        line += (f"; Triton's compute times at the model's peak ({level_text(wire.mode, best.level)}) are missing: "
                 "what its instances would do is not known")
    return Assessment(line, wire_is_the_limit(peak_ips, wire), peak_ips, float(best.level) if best else None, capacity)
