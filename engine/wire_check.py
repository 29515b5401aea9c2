"""The wire check (load.wire_check, ``--wire``): the request path's ceiling, measured by sending
the model-under-test's bytes per item, with the same transport and batch size, to the
no-compute ``wire`` model (model_repository/embedded/wire) at the sweep's levels. The wire's
levels reach the recording as one WireCeiling event, never as the model's levels.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import msgspec

from engine import events as ev
from engine.analysis.wire import assess, level_text, wire_ceiling, wire_elements
from engine.errors import UserError
from engine.format import body_size
from engine.load.sweep import run_sweep
from engine.profiles import Load
from engine.triton.api import TritonApi
from engine.triton.request import request_inputs
from engine.triton.target import Target, TargetInfo, describe_target
from engine.triton.target_setup import check_input_shapes

WIRE_MODEL = "wire"  # model_repository/embedded/wire: no compute, measures the request path alone
Publish = Callable[[ev.Event], None]


async def bytes_per_item(target: Target, info: TargetInfo, load: Load) -> tuple[int, bool]:
    """The model's request bytes per item (the input data's mean over its entries, when the
    load sends data), and whether the wire's one FP32 tensor only approximates that request."""
    _shapes, tensors, _ = request_inputs(target, info, 1, load.data)
    size = sum(len(blob) for _t, blob in tensors)
    if load.input_data:
        from engine.triton.input_data import read_input_data
        from engine.triton.request_set import data_requests

        data = await asyncio.to_thread(read_input_data, load.input_data, info, target.input_shapes)
        sizes = [sum(len(blob) for _t, blob in r.tensors) for r in data_requests(target, info, 1, data)]
        size = sum(sizes) // len(sizes)
    return size, not (len(tensors) == 1 and tensors[0][0].get("datatype") == "FP32")


async def wire_check(target: Target, info: TargetInfo, load: Load, results: list[ev.LevelResult],
                     gpus: tuple[int, ...], publish: Publish, stop: asyncio.Event) -> str | None:
    """Run the wire's levels and publish the WireCeiling and what it says of the sweep. Returns
    why it was skipped (a warning is published too), None when it ran or had nothing to run."""
    if target.model == WIRE_MODEL:
        return _skipped(publish, "the model under test is the wire model itself")
    per_item, approximated = await bytes_per_item(target, info, load)
    wire_target = Target(http_url=target.http_url, model=WIRE_MODEL, headers=dict(target.headers),
                         input_shapes={"INPUT0": [wire_elements(per_item)]})
    try:
        wire_info = await describe_target(wire_target)
        if [(t.get("name"), t.get("datatype")) for t in wire_info.inputs] != [("INPUT0", "FP32")]:
            raise UserError(f"model {WIRE_MODEL!r} on this server does not take one FP32 input INPUT0")
        check_input_shapes(wire_target.input_shapes, wire_info)
    except UserError as exc:
        return _skipped(publish, f"{exc} (the server needs model_repository/embedded/wire served as {WIRE_MODEL!r})")
    size = body_size(per_item * load.batch_size)
    publish(ev.PhaseChanged(phase="wire check", detail=(
        f"the request path alone: the sweep's levels against {WIRE_MODEL!r} with {size} per request "
        f"over {load.transport}")))

    def relay(event: ev.Event) -> None:
        # the wire's levels are not the model's: they stay out of the sweep's tables and summaries
        if isinstance(event, ev.LevelStarted):
            publish(ev.PhaseChanged(phase="wire check", detail=(
                f"level {event.index + 1}/{event.total}: {level_text(event.mode, event.level)}")))
        elif isinstance(event, ev.Warning):
            publish(msgspec.structs.replace(event, source="wire", message=f"wire check: {event.message}",
                            key=f"wire-{event.key}" if event.key else ""))
        elif isinstance(event, ev.Error):
            publish(msgspec.structs.replace(event, source="wire", message=f"wire check: {event.message}"))

    try:
        wire_load = replace(load, input_shapes=wire_target.input_shapes, input_data="")
        wire_results = await run_sweep(TritonApi(wire_target, wire_info), wire_load, relay, stop, gpus=gpus)
    except UserError as exc:  # e.g. a batch size beyond the wire's max_batch_size
        return _skipped(publish, str(exc))
    if not wire_results:
        return None
    wire = wire_ceiling(target.model, load.transport, load.batch_size, per_item, approximated,
                        wire_results, mode=load.mode, wire_model=WIRE_MODEL)
    publish(wire)
    found = assess(wire, results, info.model_config or {}, len(gpus) or None)
    publish(ev.PhaseChanged(phase="wire check done", detail=found.line))
    return None


def _skipped(publish: Publish, why: str) -> str:
    """Asked for and not done: a warning now, and the run is not "ok"."""
    publish(ev.Warning(source="wire", key="wire-skipped", message=f"wire check skipped: {why}"))
    return f"wire check skipped: {why}"
