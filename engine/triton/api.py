"""Triton's KServe v2 API behind the load engine's seam (engine/load/server_api.py's ServerApi):
the target and its metadata, the transports of the TRANSPORTS table, the requests made from
load.data, load.input_data or synthetic prompts, the statistics extension, the health probe.

``TritonApi(target, info)`` is what ``run_sweep`` takes for a Triton model (``info``: what
describe_target read of it; ``rank``: this host's among several load hosts, which a sequence
model's ids fold in).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from engine.analysis.stream_split import split_applies
from engine.errors import UserError
from engine.events import Event, InputDataUsed, ServerBreakdown, Warning
from engine.transport_table import is_decoupled, transport_spec
from engine.triton.path_probe import METHOD, health_rtt
from engine.triton.recovery import wait_until_ready
from engine.triton.sequences import SequenceSetup, check_sequence_load, sequence_config
from engine.triton.server_stats import (
    StatsSnapshot,
    breakdown,
    ensemble_steps,
    fetch_snapshot,
    summed,
    taken_in_time,
)
from engine.triton.target import Endpoint, Target, TargetInfo
from engine.triton.transports import (
    INTEGER_TYPES,
    Prepared,
    RequestInputs,
    SweepInputs,
    Transport,
    check_streaming,
    transport_named,
)

if TYPE_CHECKING:
    from engine.profiles import Load

Publish = Callable[[Event], None]


class TritonStats:
    """Triton's statistics extension, read per endpoint (an ensemble's steps with it)."""

    def __init__(self, targets: list[Target]) -> None:
        self.targets = targets

    async def snapshot(self, endpoint: int, timeout_s: float) -> StatsSnapshot | None:
        return await fetch_snapshot(self.targets[endpoint], timeout_s)

    def in_time(self, snapshot: object | None, boundary_ns: int, interval_ns: int) -> bool:
        assert snapshot is None or isinstance(snapshot, StatsSnapshot)
        return taken_in_time(snapshot, boundary_ns, interval_ns)

    def breakdown(self, before: Sequence[object], after: Sequence[object],
                  client_mean_s: float | None) -> ServerBreakdown | None:
        b = [s for s in before if isinstance(s, StatsSnapshot)]
        a = [s for s in after if isinstance(s, StatsSnapshot)]
        if len(self.targets) == 1:
            return breakdown(b[0] if b else None, a[0] if a else None, client_mean_s)
        return breakdown(summed(list(b)), summed(list(a)), client_mean_s)


class TritonApi:
    """One Triton model behind one or more servers (``target.endpoints``)."""

    round_trip_method = METHOD
    cache = None  # Triton's /metrics has no LLM cache counters for our models: not measured
    trace_times = None  # its inputs are no timed trace

    def __init__(self, target: Target, info: TargetInfo, rank: int = 0) -> None:
        # an ensemble's statistics are read with its steps'; a decoupled model's server time is not split
        self.target = dataclasses.replace(target, composing=ensemble_steps(info.model_config),
                                          decoupled=not split_applies(info.model_config))
        self.info = info
        self._endpoints = self.target.endpoint_list()
        each = [self.target.at(ep) for ep in self._endpoints] if len(self._endpoints) > 1 else [self.target]
        self.stats = TritonStats(each)
        self._transport: Transport | None = None
        self._counted: tuple[str, str] | None = None
        self.rank = rank
        self.sequence = sequence_config(info.model_config)  # None: not a sequence model
        self._streams: tuple[int, ...] = ()  # the input data's steps per stream (sequence models)

    @property
    def model(self) -> str:
        return self.target.model

    @property
    def decoupled(self) -> bool:
        return self.target.decoupled

    def endpoints(self) -> list[Endpoint]:
        return self._endpoints

    def transport(self, load: Load) -> str:
        module, self._transport = transport_named(load.transport)
        check_streaming(load.transport, self.target.model, self.info.model_config)
        check_sequence_load(load, self.target.model, self.sequence, False)
        self._counted = tokens_output(load, self.info)
        return module

    async def requests(self, load: Load, publish: Publish, stop: asyncio.Event) -> list[RequestInputs]:
        requests, warnings, self._streams = await _requests(self.target, self.info, load, publish, stop)  # made once
        check_sequence_load(load, self.target.model, self.sequence, bool(self._streams))
        for text in warnings:
            publish(Warning(source="load", message=text, key="input-shape"))
        return requests

    async def prepare(self, load: Load, requests: Sequence[object], gpus: tuple[int, ...]) -> list[Prepared]:
        if self._transport is None:
            self.transport(load)
        assert self._transport is not None
        made = [r for r in requests if isinstance(r, RequestInputs)]
        first = made[0]
        sequence = (SequenceSetup(self.sequence, self._streams, load.sequence_length, load.sequence_length_variation,
                                  self.rank) if self.sequence is not None else None)
        sweep = SweepInputs(self.target, self.info, load.batch_size, load.data, (first.shapes, first.tensors, []),
                            gpus, made, load.validate_tolerance, self._counted, sequence=sequence)
        return await prepare_each(self._transport, sweep, self._endpoints)

    async def round_trip(self) -> float | None:
        return await health_rtt(self.target)

    async def wait_ready(self, endpoint: int, stop: asyncio.Event, timeout_s: float) -> float | None:
        return await wait_until_ready(self.target.at(self._endpoints[endpoint]), stop, timeout_s)


async def prepare_each(transport: Transport, sweep: SweepInputs, endpoints: list[Endpoint]) -> list[Prepared]:
    """The transport's requests for each endpoint (its own shared-memory regions included); on a
    failure, what was prepared is undone and the endpoint is named."""
    if len(endpoints) == 1:
        return [await transport.prepare(sweep)]
    done: list[Prepared] = []
    try:
        for ep in endpoints:
            try:
                done.append(await transport.prepare(dataclasses.replace(sweep, target=sweep.target.at(ep),
                                                                        gpus=ep.gpus or sweep.gpus,
                                                                        server_gpu=ep.server_gpu)))
            except UserError as exc:
                raise UserError(f"endpoint {ep.name} ({ep.http_url}): {exc}") from None
    except BaseException:
        for each in done:
            await each.close()
        raise
    return done


async def _requests(target: Target, info: TargetInfo, load: Load, publish: Publish,
                    stop: asyncio.Event) -> tuple[list[RequestInputs], list[str], tuple[int, ...]]:
    """The sweep's requests: load.data's one, synthetic prompts (load.input_tokens, or a text
    model's default), or those of load.input_data (read in a thread: it may be large), which are
    then announced (InputDataUsed: the recording keeps it); and the data's steps per sequence
    stream (empty unless it gives streams)."""
    from engine.triton.input_synthetic import synthetic_data, text_input
    from engine.triton.input_tensors import DataModel
    from engine.triton.request_set import data_requests, random_requests

    model = DataModel(info, target.input_shapes)
    if load.input_tokens != "" or load.output_tokens != "":
        data = synthetic_data(model, load.input_tokens, load.output_tokens)
    elif not load.input_data and is_decoupled(info.model_config or {}) and text_input(model.inputs) is not None:
        # a streaming text model gets text, not numbers (a unary model's other inputs keep load.data)
        data = synthetic_data(model, "", "")
    elif not load.input_data:
        return (*random_requests(target, info, load.batch_size, load.data), ())
    else:
        from engine.triton.input_data import read_input_data
        from engine.triton.input_decode import Stopped

        try:  # a stop asked for while a large file is decoded ends the decode within a megabyte
            data = await asyncio.to_thread(read_input_data, load.input_data, info, target.input_shapes, stop.is_set)
        except Stopped:
            return [], [], ()
    requests = await asyncio.to_thread(data_requests, target, info, load.batch_size, data)
    publish(InputDataUsed(path=data.path, sha256=data.sha256, entries=len(data.entries), requests=len(requests),
                          source=data.kind, validated=data.validated))
    for k, note in enumerate(data.notes):  # names the model does not have, left out as perf_analyzer leaves them
        publish(Warning(source="load", message=note, key=f"input-data-{k}"))
    return requests, [], data.streams


def tokens_output(load: Load, info: TargetInfo) -> tuple[str, str] | None:
    """load.tokens_from as (name, datatype), checked against the model before any load: an
    integer output of a model answered over a streaming transport; None when not set."""
    name = load.tokens_from
    if not name:
        return None
    if not transport_spec(load.transport).streams:
        raise UserError(f"load.tokens_from: counts a streaming model's tokens; load.transport {load.transport!r} "
                        "does not stream")
    outputs = {str(o.get("name")): str(o.get("datatype") or "") for o in info.outputs}
    if name not in outputs:
        raise UserError(f"load.tokens_from: expected one of the model's outputs ({', '.join(sorted(outputs))}), "
                        f"found {name!r}")
    if outputs[name] not in INTEGER_TYPES:
        raise UserError(f"load.tokens_from: output {name} is {outputs[name]}; a token count is an integer output")
    return name, outputs[name]
