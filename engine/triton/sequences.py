"""Sequence models (Triton's sequence batcher), on the session's side: recognised from the model
config, checked against the load before any request, and their requests' sequence slots found
(the load workers fill them: engine/triton/transports/sequence_steps.py).

The control inputs the config names (CONTROL_SEQUENCE_START, END, READY, CORRID) are not sent as
tensors: KServe v2's request parameters ``sequence_id``, ``sequence_start`` and ``sequence_end``
carry them, and Triton sets each control input from them, as perf_analyzer's requests do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import UserError
from engine.triton.transports.sequence_steps import (
    FLAG_WIDTH,
    ID_WIDTH,
    PROTO_PARAMETERS,
    PROTO_SLOTS,
    RANK_SHIFT,
    SequencePlan,
)

if TYPE_CHECKING:
    from engine.profiles import Load

SEQUENCE_TRANSPORTS = ("http", "grpc", "system_shm", "cuda_shm")  # those that set the sequence parameters
ID_KEY = b'"sequence_id":'
START_KEY = b'"sequence_start":'
END_KEY = b'"sequence_end":'
# the JSON header's first member: fixed-width slots the workers overwrite per step
PARAMETERS = (b'{"parameters":{' + ID_KEY + b"0".ljust(ID_WIDTH) + b"," + START_KEY + b"false," + END_KEY
              + b"false},")


@dataclass(frozen=True)
class SequenceConfig:
    """What the model config says of its sequence batcher."""

    strategy: str  # "direct" or "oldest"
    controls: dict[str, str]  # control kind (CONTROL_SEQUENCE_START, ...) -> input name
    idle_us: int  # max_sequence_idle_microseconds (0: not set, Triton's default)
    max_candidates: int | None  # oldest: max_candidate_sequences
    corrid_type: str = ""  # CONTROL_SEQUENCE_CORRID's data_type ("TYPE_UINT64", ...); "" without one
    per_instance: int = 1  # max_batch_size: the sequences one instance holds at once
    instances: int = 0  # as the config lists them; 0 where it lists none

    @property
    def slots(self) -> int | None:
        """direct: the sequences Triton holds at once; None where the config does not say (oldest
        strategy, no instance_group)."""
        return self.per_instance * self.instances if self.instances and self.strategy == "direct" else None


def sequence_config(model_config: dict[str, Any] | None) -> SequenceConfig | None:
    """The model's sequence batcher, or None for a model without one."""
    batching = (model_config or {}).get("sequence_batching")
    if not isinstance(batching, dict):
        return None
    strategy = "oldest" if isinstance(batching.get("oldest"), dict) else "direct"
    controls, corrid_type = {}, ""
    for item in batching.get("control_input") or []:
        if not isinstance(item, dict):
            continue
        for control in item.get("control") or []:
            if isinstance(control, dict) and control.get("kind"):
                controls[str(control["kind"])] = str(item.get("name"))
                if control["kind"] == "CONTROL_SEQUENCE_CORRID":
                    corrid_type = str(control.get("data_type") or "")
    oldest = batching.get("oldest") if strategy == "oldest" else None
    candidates = oldest.get("max_candidate_sequences") if isinstance(oldest, dict) else None
    instances = _instances(model_config or {})
    per_instance = max(1, int((model_config or {}).get("max_batch_size") or 0))
    return SequenceConfig(strategy, controls, int(batching.get("max_sequence_idle_microseconds") or 0),
                          int(candidates) if candidates else None, corrid_type, per_instance, instances)


def _instances(model_config: dict[str, Any]) -> int:
    """The model's instances, as the served config lists them (count per GPU where it names GPUs);
    0 where it lists none."""
    total = 0
    for group in model_config.get("instance_group") or []:
        if isinstance(group, dict):
            total += int(group.get("count") or 1) * max(1, len(group.get("gpus") or []))
    return total


# Triton 2.51's statistics (v2 JSON: inference_stats, batch_stats, response_stats, memory_usage)
# and /metrics (nv_inference_*) carry no count of the sequences the batcher holds
HELD_NOT_REPORTED = ("Sequences Triton held: not reported by this server (its statistics and /metrics have no "
                     "sequence batcher figure).")


def batcher_line(config: SequenceConfig) -> str:
    """The sequence batcher's settings a report states beside a sequence model's figures."""
    idle = f"{config.idle_us} µs" if config.idle_us else "not set (Triton's default, 1 s)"
    candidates = (f", max_candidate_sequences {config.max_candidates}" if config.max_candidates else
                  (", max_candidate_sequences not set" if config.strategy == "oldest" else ""))
    controls = ", ".join(f"{name} ({kind.removeprefix('CONTROL_SEQUENCE_')})" for kind, name in config.controls.items())
    slots = (f"; {config.slots} sequence slots (max_batch_size {config.per_instance} x "
             f"{config.instances} instance{'s' if config.instances > 1 else ''})" if config.slots else "")
    # Triton starts a request's queue time as the sequence batcher takes it in (its Enqueue), so a
    # step waiting for a slot, or (oldest) for a place among the candidates, waits in its queue time
    wait = "a free sequence slot" if config.strategy == "direct" else "a place among the candidate sequences"
    return (f"A sequence model (Triton's sequence batcher, {config.strategy} strategy): max_sequence_idle_microseconds "
            f"{idle}{candidates}{slots}; control inputs {controls or 'none'}, set from each request's sequence id, "
            "start and end. A level is that many sequences in flight; the first step's latency is shown apart from "
            f"the later steps' (it sets up the state). Queue ms is Triton's mean queue time per request: it includes "
            f"a new sequence's wait for {wait} while all are held, a wait its first step's latency holds too. "
            f"{HELD_NOT_REPORTED}")


def control_names(config: SequenceConfig) -> set[str]:
    """The inputs Triton fills from the request's sequence parameters: never sent as tensors."""
    return set(config.controls.values())


def check_sequence_load(load: Load, model: str, config: SequenceConfig | None, streams: bool) -> None:
    """The load against the model, before any request: one line for what cannot run."""
    if config is None:
        if streams:
            raise UserError(f"input data {load.input_data}: sequence streams (lists of steps) are for sequence models; "
                            f"model {model!r} has no sequence_batching")
        return
    if load.transport not in SEQUENCE_TRANSPORTS:
        raise UserError(f"model {model!r} is a sequence model: load.transport {load.transport!r} does not set "
                        f"sequence ids yet; use one of: {', '.join(SEQUENCE_TRANSPORTS)}")
    if config.corrid_type == "TYPE_STRING":
        name = config.controls.get("CONTROL_SEQUENCE_CORRID", "")
        raise UserError(f"model {model!r}: control input {name!r} (CONTROL_SEQUENCE_CORRID) takes string sequence "
                        "ids; the tool sends integer ids only")
    if load.batch_size != 1:
        raise UserError(f"model {model!r} is a sequence model: each request is one step of one sequence, so "
                        f"load.batch_size must be 1, found {load.batch_size}")


def slot_offsets(raw: bytes) -> tuple[int, int, int]:
    """Where a request's id, start and end slots begin in its bytes (the first of each: the
    JSON header comes before any tensor bytes)."""
    return (raw.index(ID_KEY) + len(ID_KEY), raw.index(START_KEY) + len(START_KEY), raw.index(END_KEY) + len(END_KEY))


@dataclass(frozen=True)
class SequenceSetup:
    """A sequence model's sweep, as the transport prepares it."""

    config: SequenceConfig
    streams: tuple[int, ...]  # the input data's steps per stream; empty: lengths drawn per sequence
    length: int  # load.sequence_length
    variation: float  # load.sequence_length_variation (percent)
    rank: int = 0  # this host's rank among the load hosts (ids differ per host)

    def plan(self, raws: tuple[bytes, ...], proto_at: int = -1) -> SequencePlan:
        """The plan every worker walks: each request's slots, the streams as (first request, steps).
        ``proto_at``: gRPC messages led by PROTO_PARAMETERS, sent framed with that many bytes before
        them (-1: HTTP's JSON)."""
        if proto_at >= 0:
            assert all(r.startswith(PROTO_PARAMETERS) for r in raws)
            slots = tuple((proto_at + PROTO_SLOTS[0], proto_at + PROTO_SLOTS[1], proto_at + PROTO_SLOTS[2])
                          for _ in raws)
        else:
            slots = tuple(slot_offsets(r) for r in raws)
        for (a, b, c), raw in zip(slots, raws, strict=True):  # the slots hold what PARAMETERS put there
            assert proto_at >= 0 or (raw[c : c + FLAG_WIDTH] == b"false" and raw[b : b + FLAG_WIDTH] == b"false")
            assert a < b < c
        firsts, at = [], 0
        for steps in self.streams:
            firsts.append((at, steps))
            at += steps
        return SequencePlan(slots, tuple(firsts), self.length, self.variation, self.rank << RANK_SHIFT,
                            self.config.idle_us, proto=proto_at >= 0)
