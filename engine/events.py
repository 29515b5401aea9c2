"""The one contract between the engines, the recorder and the screens.

Every piece of data that reaches a screen or a file travels as one of these events.
Events are plain dataclasses: typed, JSON-serialisable through ``to_dict``/``event_from_dict``,
and versioned by ``SCHEMA_VERSION``. Rules that keep the contract small and stable:

* every event carries ``ts`` (UNIX wall-clock seconds, set by the producer) so that replay and
  snapshot tests never read the clock;
* values that a source cannot give are ``None`` ("not available"), never 0 or -1;
* durations inside events are in seconds (floats), sizes in bytes, rates per second;
* a new optional field with a default is a minor change (same ``SCHEMA_VERSION``); a removed
  or renamed field bumps it. Readers reject events of a newer version than they know.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

SCHEMA_VERSION = 1


class EventSchemaError(ValueError):
    """A serialised event that this version of the contract cannot read."""


class UnknownEventKind(EventSchemaError):
    """An event kind this version does not know: a reader of a newer minor version's recording
    skips it (and counts it) instead of failing."""

    def __init__(self, kind: object) -> None:
        super().__init__(f"unknown event kind {kind!r}")
        self.event_kind = kind


# --------------------------------------------------------------------------- base


@dataclass
class Event:
    kind: ClassVar[str] = "event"
    ts: float = field(default_factory=time.time, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["kind"] = self.kind
        data["v"] = SCHEMA_VERSION
        return data


_REGISTRY: dict[str, type[Event]] = {}


def register(cls: type[Event]) -> type[Event]:
    if cls.kind in _REGISTRY:
        raise ValueError(f"duplicate event kind {cls.kind!r}")
    _REGISTRY[cls.kind] = cls
    return cls


def event_kinds() -> dict[str, type[Event]]:
    return dict(_REGISTRY)


# error kinds as recordings made before the load engine named them by what happened
# (engine/load/transport.py) spelt them: read as today's names
RENAMED_ERROR_KINDS = {"http_4xx": "rejected", "http_5xx": "server_error"}


def _current_kinds(errors_by_kind: dict[str, int]) -> dict[str, int]:
    if not any(kind in RENAMED_ERROR_KINDS for kind in errors_by_kind):
        return errors_by_kind
    renamed: dict[str, int] = {}
    for kind, count in errors_by_kind.items():
        new = RENAMED_ERROR_KINDS.get(kind, kind)
        renamed[new] = renamed.get(new, 0) + count
    return renamed


# --------------------------------------------------------------------------- nested records


@dataclass
class LatencyStats:
    """Latency of completed requests, seconds. ``exact`` is False for live estimates."""

    count: int
    mean: float | None = None
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    exact: bool = True


@dataclass
class ServerBreakdown:
    """Deltas of Triton's statistics extension over an interval, averaged per request.

    ``request_count`` is the delta of success.count; ``execution_count`` and
    ``inference_count`` give the average dynamic batch size. Times are seconds per request.
    """

    request_count: int
    inference_count: int
    execution_count: int
    queue: float | None = None
    compute_input: float | None = None
    compute_infer: float | None = None
    compute_output: float | None = None
    server_total: float | None = None  # success.ns delta / count: the server's own request time
    avg_batch_size: float | None = None  # inference_count / execution_count
    client_minus_server: float | None = None  # client mean latency - server_total: network + client
    dropped: list[str] = field(default_factory=list)  # the server's values left out as impossible


@dataclass
class NetworkPath:
    """The path between the load generator and the server, measured at one level.

    ``rtt`` is the round trip the network rule uses: the fastest time to the first byte of the
    server's health answer on a fresh connection before the level (``rtt_method`` says how it was
    measured). The kernel's figures (connect time, TCP_INFO's smoothed RTT) measure only to the
    next TCP endpoint: a proxy or load balancer in between hides the rest of the path."""

    rtt: float | None = None  # seconds
    rtt_method: str = ""  # "health probe", "tcp_info" or "connect time"
    connections: int = 0  # the level's connections these figures cover
    connect_p50: float | None = None  # seconds from connect() to the socket being writable
    connect_max: float | None = None
    tcp_rtt_p50: float | None = None  # the kernel's smoothed RTT (Linux TCP_INFO); None elsewhere
    request_bytes: int = 0  # one request on the wire, as the transport built it (0: not known)


@dataclass
class ClientAudit:
    """The load generator judging itself: is the client, not the server, the limit?"""

    cpu_percent: float | None = None  # sum over load workers, 100 = one full core
    cpu_cores: int | None = None  # cores on the client machine
    loop_lag_p99: float | None = None  # event-loop lag, seconds (worst worker)
    late_sends: int = 0  # rate mode: requests sent after their intended time + tolerance
    sent: int = 0
    # (latency - Triton's own request time) / latency: network, HTTP front end and client I/O
    overhead_fraction: float | None = None
    client_bound: bool = False
    reasons: list[str] = field(default_factory=list)
    # Where each request's time went, measured per request by the workers (seconds): handing
    # the request to the kernel, waiting for the response's first byte, and our side (the
    # response unread in our socket, reading it, a late send). See engine/load/audit.py.
    write_p50: float | None = None
    write_p99: float | None = None
    first_byte_p50: float | None = None
    client_delay_p50: float | None = None
    client_delay_p99: float | None = None
    client_delay_fraction: float | None = None  # mean of our side / mean latency
    # the largest share of the level a worker spent runnable but waiting for a CPU (run queue)
    cpu_wait_fraction: float | None = None


@dataclass
class GpuReading:
    """One GPU at one instant. ``source`` is "nvml" or "triton" (its /metrics)."""

    uuid: str
    index: int | None
    source: str
    name: str | None = None
    util_gpu: float | None = None  # percent
    util_mem: float | None = None  # percent (memory controller busy)
    mem_used: int | None = None  # bytes
    mem_total: int | None = None  # bytes
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None  # cumulative, where the source has it
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_tx_bps: float | None = None  # bytes/s
    pcie_rx_bps: float | None = None
    nvlink_tx_bps: float | None = None
    nvlink_rx_bps: float | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)  # {pid, name, mem_used}
    bus_id: str | None = None
    # a GPU of one of several servers (Triton's /metrics): "ep1:0", its endpoint and place there;
    # its uuid then starts with "ep1:" too, so two servers sharing a GPU show it twice
    label: str | None = None


@dataclass
class GpuLink:
    """How two GPUs reach each other (NVML topology)."""

    a: str  # uuid
    b: str  # uuid
    nvlink_count: int = 0
    p2p_read: str | None = None  # "ok", "not supported", ... as NVML names it
    p2p_write: str | None = None
    p2p_nvlink: str | None = None
    common_ancestor: str | None = None  # "PIX", "PXB", "PHB", "NODE", "SYS", "NV#", ...


@dataclass
class AllReduceRow:
    size_bytes: int
    time_s: float  # mean time of one all-reduce
    algbw_gbps: float  # GB/s, GB = 1e9 bytes
    busbw_gbps: float


@dataclass
class StatSummary:
    """Mean of repeated runs after outlier removal, with a 95 % t-distribution CI."""

    mean: float
    ci_low: float | None
    ci_high: float | None
    n: int
    n_outliers: int = 0
    std: float | None = None


# --------------------------------------------------------------------------- session


@register
@dataclass
class SessionStarted(Event):
    kind: ClassVar[str] = "session_started"
    session_id: str
    profile_name: str
    profile: dict[str, Any]  # the validated profile, as a dict (credentials redacted)
    mode: str  # "sweep", "probe", "all"
    host: dict[str, Any] = field(default_factory=dict)  # hostname, cpu model, cores, ram
    versions: dict[str, Any] = field(default_factory=dict)  # ours, python, torch, triton, driver, cuda
    tool_version: str = ""


@register
@dataclass
class SessionEnded(Event):
    kind: ClassVar[str] = "session_ended"
    status: str  # "ok", "failed", "interrupted"
    error: str | None = None
    exit_code: int = 0


@register
@dataclass
class PhaseChanged(Event):
    """Coarse progress for humans: "starting server", "warmup", "sweep", "probe", ..."""

    kind: ClassVar[str] = "phase"
    phase: str
    detail: str = ""


@register
@dataclass
class ServerReady(Event):
    kind: ClassVar[str] = "server_ready"
    http_url: str
    metrics_url: str | None
    embedded: bool
    model: str
    model_version: str = ""
    config_variant: str = ""  # "1x", "2x", "4x", "8x", "cpu"
    triton_version: str | None = None
    model_config: dict[str, Any] = field(default_factory=dict)  # /v2/models/<m>/config
    inputs: list[dict[str, Any]] = field(default_factory=list)  # name, datatype, shape
    log_path: str | None = None
    # the embedded server on GPUs: whether it runs under MPS (engine/server/mps.py), and why;
    # None for a remote server, a CPU variant, or a recording made before MPS was known
    mps: bool | None = None
    mps_why: str = ""
    endpoints: list[str] = field(default_factory=list)  # several servers: "ep1 http://..." each


@register
@dataclass
class ServerStopped(Event):
    kind: ClassVar[str] = "server_stopped"
    reason: str = ""
    exit_code: int | None = None


# --------------------------------------------------------------------------- load engine


@register
@dataclass
class LevelStarted(Event):
    kind: ClassVar[str] = "level_started"
    mode: str  # "concurrency" or "rate"
    level: float  # in-flight requests, or requests/s
    index: int  # 0-based position in the sweep
    total: int  # levels in the sweep
    batch_size: int = 1
    arrival: str | None = None  # rate mode: "constant" or "poisson"
    workers: int = 1
    slo_search: bool = False  # a level the latency-target search added after the planned ones
    trial: int = 1  # 2, 3, ...: the level measured again (unstable, contended or out of line)


@register
@dataclass
class WindowResult(Event):
    """One measurement window of one level (requests attributed by completion time)."""

    kind: ClassVar[str] = "window"
    level: float
    index: int  # window number within the level, warmup windows included
    warmup: bool
    t_start: float  # UNIX seconds
    t_end: float
    requests: int
    errors: int
    throughput_rps: float  # completed requests / s
    throughput_ips: float  # inferences (images) / s = requests x batch
    latency: LatencyStats
    server: ServerBreakdown | None = None
    audit: ClientAudit = field(default_factory=ClientAudit)
    stable_so_far: bool = False
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    # shares of the cores this process may use over the window (engine/cpu_share.py): taken by
    # processes neither ours nor the server's, and stolen by the hypervisor; None: not measured
    others_cpu: float | None = None
    steal: float | None = None

    def __post_init__(self) -> None:
        self.errors_by_kind = _current_kinds(self.errors_by_kind)


@dataclass
class EndpointResult:
    """One server's share of a level spread over several (engine/load/endpoints.py): its figures
    over the level's merged windows (they add up to the level's), its errors over every measured
    window. ``failed``: a measured window in which it answered nothing and failed requests."""

    name: str  # "ep1", "ep2", ...
    url: str  # its HTTP URL, credentials removed
    connections: int = 0  # concurrency mode: its connections (rate mode: 0)
    target_rate: float | None = None  # rate mode: its share of the level's rate
    requests: int = 0
    errors: int = 0
    throughput_rps: float = 0.0
    throughput_ips: float = 0.0
    latency: LatencyStats = field(default_factory=lambda: LatencyStats(count=0))
    server: ServerBreakdown | None = None
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    error_messages: list[str] = field(default_factory=list)
    failed: bool = False


@register
@dataclass
class LevelResult(Event):
    """A level's merged result: the stable windows, exact percentiles."""

    kind: ClassVar[str] = "level_result"
    mode: str
    level: float
    index: int
    # "stable", "unstable", "contended" (others took more than load.contended_percent of the CPU:
    # read as unstable), "failed", "interrupted" (stopped before it was decided)
    status: str
    batch_size: int
    windows: int  # measurement windows run (warmup excluded)
    merged_windows: int  # windows merged into this result
    requests: int
    errors: int
    throughput_rps: float
    throughput_ips: float
    latency: LatencyStats
    server: ServerBreakdown | None = None
    audit: ClientAudit = field(default_factory=ClientAudit)
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    error_messages: list[str] = field(default_factory=list)  # a few distinct examples
    # rate mode: latency from the actual send time (what a closed-loop tool would report)
    latency_uncorrected: LatencyStats | None = None
    target_rate: float | None = None
    duration_s: float = 0.0
    slo_search: bool = False  # a level the latency-target search added after the planned ones
    network: NetworkPath | None = None  # None: not measured (an older recording)
    endpoints: list[EndpointResult] = field(default_factory=list)  # a sweep over several servers: one each
    # over the measured windows (WindowResult's): the largest share others took, the mean steal
    others_cpu: float | None = None
    steal: float | None = None
    trial: int = 1  # which measurement of this level this is; the last one published stands
    remeasure: str = ""  # why the level is measured again ("" when it is not)

    def __post_init__(self) -> None:
        self.errors_by_kind = _current_kinds(self.errors_by_kind)


@register
@dataclass
class InputDataUsed(Event):
    """The input data a sweep sends (load.input_data), read before its first level: which file
    or folder, its digest, and the requests its entries make."""

    kind: ClassVar[str] = "input_data"
    path: str
    sha256: str  # of the file; of a folder, its files' relative paths and bytes in sorted order
    entries: int
    requests: int  # the distinct requests the entries make at the sweep's batch size
    source: str = "json"  # "json" or "folder"
    validated: bool = False  # whether it has validation data (answers compared with it)


@register
@dataclass
class SweepFinished(Event):
    kind: ClassVar[str] = "sweep_finished"
    levels: int
    stable: int
    failed: int
    saturation_level: float | None = None


@dataclass
class WireLevel:
    """One level of the wire check: the request path alone (see WireCeiling)."""

    level: float
    status: str  # as LevelResult.status
    throughput_ips: float  # items (images) / s
    throughput_rps: float
    p50: float | None = None  # seconds
    p99: float | None = None
    errors: int = 0
    client_bound: bool = False  # the load generator's own audit flagged this level


@register
@dataclass
class WireCeiling(Event):
    """The wire's ceiling: after a sweep, the same levels sent to the no-compute ``wire`` model
    with the model-under-test's bytes per item, the same transport and batch size: what the
    request path alone carries (client, HTTP body or shared memory, Triton's front end and
    batcher, the backend's hand-over)."""

    kind: ClassVar[str] = "wire_ceiling"
    model: str  # the model under test, whose input the wire carried
    transport: str  # load.transport: "http", "system_shm", "cuda_shm"
    batch_size: int
    bytes_per_item: int  # the model's real input bytes per item (all inputs)
    request_bytes: int  # input bytes per request as sent to the wire (batch x FP32 elements x 4)
    input_shape: list[int] = field(default_factory=list)  # the wire's INPUT0 per item, e.g. [150528]
    approximated: bool = False  # the model's input is not one FP32 tensor: the same bytes as FP32
    wire_model: str = "wire"
    mode: str = "concurrency"  # as the sweep's load.mode
    levels: list[WireLevel] = field(default_factory=list)
    peak_ips: float | None = None  # the highest throughput of a level that did not fail
    peak_level: float | None = None
    peak_client_bound: bool = False  # the peak level measured the load generator, not the path
    saturated: bool = False  # the wire's throughput stopped rising within the levels run


# --------------------------------------------------------------------------- telemetry


@register
@dataclass
class GpuSample(Event):
    kind: ClassVar[str] = "gpu_sample"
    gpus: list[GpuReading]
    source: str  # "nvml" or "triton"
    interval_s: float  # the source's own resolution


@register
@dataclass
class HostSample(Event):
    kind: ClassVar[str] = "host_sample"
    cpu_percent: float | None
    per_core: list[float] = field(default_factory=list)
    mem_used: int | None = None
    mem_total: int | None = None
    own_cpu_percent: float | None = None  # this tool's processes (session + load workers)
    server_cpu_percent: float | None = None  # the embedded server's processes (100 = one core); None: not ours
    net_tx_bps: float | None = None
    net_rx_bps: float | None = None


@register
@dataclass
class Topology(Event):
    kind: ClassVar[str] = "topology"
    gpus: list[dict[str, Any]]  # uuid, index, name, bus_id, pcie gen/width, nvlink links up
    links: list[GpuLink] = field(default_factory=list)
    summary: str = ""  # e.g. "4x NVIDIA H200, NVLink (NV18) between all pairs"


# --------------------------------------------------------------------------- box check


@dataclass
class CheckItem:
    """One verdict of `gpuscale-tui check`: what was measured against what was expected."""

    name: str  # "pcie link", "power limit", "p2p", "h2d bandwidth", "ram per gpu", ...
    scope: str  # "GPU 0", "GPU 0-1", "all GPUs", "host", "profile"
    status: str  # "ok", "warn", "fail", "n/a" (could not be measured here)
    measured: str = ""
    expected: str = ""
    note: str = ""  # why it matters or what to do, one line


@register
@dataclass
class BoxCheck(Event):
    """Is this box fit for the run: per-item verdicts and one go/no-go line."""

    kind: ClassVar[str] = "box_check"
    verdict: str  # "go", "warn" (go, with warnings), "no-go"
    summary: str  # the one line: "NO-GO: 1 fail, 2 warn: GPU 2 PCIe link x4 (expected x16)"
    items: list[CheckItem] = field(default_factory=list)
    gpus: int = 0  # GPUs NVML found
    facts: dict[str, Any] = field(default_factory=dict)  # the measured facts, as plain data
    duration_s: float = 0.0
    # "": measured for this session; otherwise where it was measured, e.g. "the study's check, taken
    # before config 1x": a study checks the box once and records that result in every config
    reused: str = ""


# --------------------------------------------------------------------------- training probe


@register
@dataclass
class ProbeResult(Event):
    """One training configuration (model x strategy x world size x batch), repeated runs."""

    kind: ClassVar[str] = "probe_result"
    model: str
    params: int
    strategy: str  # "ddp", "fsdp", "single"
    scaling: str  # "weak" (per-GPU batch fixed) or "strong" (global batch fixed)
    world_size: int
    per_device_batch: int
    global_batch: int
    device: str  # "cuda" or "cpu"
    backend: str  # "nccl" or "gloo"
    precision: str  # "fp32", "bf16", "fp16"
    samples_per_s: StatSummary
    step_time_s: StatSummary
    speedup: float | None = None  # vs world size 1, same model/batch/scaling
    efficiency: float | None = None
    comm_overhead: float | None = None  # fraction of step time spent on gradient sync
    peak_mem_bytes: list[int] = field(default_factory=list)  # per rank
    gpu_util: list[float] = field(default_factory=list)  # per rank, mean over the run
    p_value: float | None = None  # Welch two-tailed vs world size 1
    significant: bool | None = None
    warmup_steps: int = 0
    steps: int = 0
    repeats: int = 0
    # the world-size-1 result compared with (seed 002's "single -> multi" columns); None/[] if none
    baseline_samples_per_s: StatSummary | None = None
    baseline_step_time_s: float | None = None
    baseline_gpu_util: list[float] = field(default_factory=list)


@register
@dataclass
class AllReduceResult(Event):
    kind: ClassVar[str] = "allreduce_result"
    world_size: int
    backend: str
    device: str
    rows: list[AllReduceRow]
    link_limit_gbps: float | None = None  # the physical per-direction limit, where known
    link: str | None = None  # "NVLink4", "PCIe Gen4 x16", "host memory (gloo)"


# --------------------------------------------------------------------------- scaling study
# Published on the study's own bus (engine/study), never inside a variant's recording: the
# study's index file (<name>.study.json) holds what they say.


@register
@dataclass
class StudyStarted(Event):
    kind: ClassVar[str] = "study_started"
    study_id: str
    model: str
    variants: list[str]  # in the order they run
    levels: list[float]  # the planned levels of every variant (the SLO search adds its own)
    mode: str  # "concurrency" or "rate"
    server: str  # "embedded", "remote (model control)", "remote (manual)"
    slo: str | None = None  # e.g. "p99=50ms"
    search_steps: int = 0  # at most this many SLO-search levels per variant
    index_path: str | None = None


@register
@dataclass
class StudyVariantStarted(Event):
    kind: ClassVar[str] = "study_variant_started"
    variant: str
    position: int  # 0-based, in StudyStarted.variants
    how: str = ""  # "embedded server restarted", "loaded through the repository API", ...


@register
@dataclass
class StudyVariantFinished(Event):
    kind: ClassVar[str] = "study_variant_finished"
    variant: str
    position: int
    status: str  # the variant session's status: "ok", "failed", "interrupted"
    exit_code: int
    recording: str | None = None
    error: str | None = None


@register
@dataclass
class StudyFinished(Event):
    kind: ClassVar[str] = "study_finished"
    status: str  # "ok", "failed", "interrupted"
    finished: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    index_path: str | None = None
    exit_code: int = 0
    # scale out or scale up, one line per scale-out config (engine/analysis/scale_out.py)
    scale_answers: list[str] = field(default_factory=list)
    answer: str = ""  # the study's one line: "answer: ..." (engine/study/figures.py)


# --------------------------------------------------------------------------- messages


@register
@dataclass
class Warning(Event):  # noqa: A001 - the name is the contract's
    kind: ClassVar[str] = "warning"
    source: str  # "telemetry", "load", "server", "probe", "record", ...
    message: str
    key: str = ""  # stable id so that consumers can show a warning once


@register
@dataclass
class Error(Event):
    kind: ClassVar[str] = "error"
    source: str
    message: str  # one line, for people
    fatal: bool = False
    detail: str = ""  # e.g. a traceback of an internal error: kept in the recording, not printed


# --------------------------------------------------------------------------- replay


@register
@dataclass
class ReplayReset(Event):
    """Replay seeks backwards: consumers clear their state; the events up to ``position_s``
    (seconds from the recording's start) follow at once. Published by the replay source only,
    never recorded."""

    kind: ClassVar[str] = "replay_reset"
    position_s: float = 0.0


# --------------------------------------------------------------------------- decoding
# One decoder for every reader (recordings, replay, probe lines, JSON exports). Each class's
# field decoders are compiled once: resolving type hints per event cost ~3x the time, which an
# hour of 8-GPU samples (3,600 GpuSample rows) turns into seconds on every replay seek.

_Decoder = Callable[[Any], Any]
ABSURD = 1e100  # no measurement is this large; beyond it, arithmetic in the reports overflows to inf


class _WrongType(TypeError):
    """A recorded value of the wrong type: the event is malformed (one line, not a traceback)."""


def _scalar_check(tp: Any) -> _Decoder | None:
    """A check for a JSON scalar of type ``tp`` (bool is not a number here, as in JSON)."""
    if tp in (float, int):  # an int field holding 3.0 was readable before: numbers stay numbers
        def number(value: Any) -> Any:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= ABSURD:
                raise _WrongType(f"expected a number, found {value!r:.40}")  # nan and inf too: never recorded
            return value
        return number
    if tp in (str, bool):
        def exact(value: Any) -> Any:
            if not isinstance(value, tp):
                raise _WrongType(f"expected a {tp.__name__}, found {value!r:.40}")
            return value
        return exact
    if typing.get_origin(tp) is dict or tp is dict:
        def mapping(value: Any) -> Any:
            if not isinstance(value, dict):
                raise _WrongType(f"expected a table, found {value!r:.40}")
            return value
        return mapping
    return None


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType) and type(None) in typing.get_args(tp)


@functools.cache
def _compile(tp: Any) -> _Decoder | None:
    """A function that rebuilds ``tp`` from JSON values (and checks their types), or None where
    the value is used as is."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _compile(args[0]) if args else None  # the first non-None type
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        fields = [f for f in dataclasses.fields(tp) if f.init]
        plan = {f.name: _compile(hints[f.name]) for f in fields}
        # a None where the type has no None (and no default to fall back on) breaks every reader
        required = frozenset(f.name for f in fields if not _optional(hints[f.name]) and hints[f.name] is not Any)

        def decode_dataclass(value: Any) -> Any:
            if not isinstance(value, dict):
                raise _WrongType(f"expected a {tp.__name__} table, found {value!r:.40}")
            kwargs: dict[str, Any] = {}
            for key, item in value.items():
                if key in plan:
                    inner = plan[key]
                    if isinstance(item, float) and not math.isfinite(item) and key not in required:
                        item = None  # as the recorder writes it: "not available"
                    if item is None:
                        if key in required:
                            raise _WrongType(f"{key}: expected a value, found None")
                        kwargs[key] = None
                        continue
                    try:
                        kwargs[key] = inner(item) if inner is not None else item
                    except _WrongType as exc:
                        raise _WrongType(f"{key}: {exc}") from None
            return tp(**kwargs)

        return decode_dataclass
    if origin is list:
        (arg,) = typing.get_args(tp) or (Any,)
        inner = _compile(arg)
        # a number the recorder could not write (inf) reads back as None: "not available"; a
        # missing table (a GPU reading) is a hole every reader would fall into
        none_ok = _optional(arg) or not (isinstance(arg, type) and dataclasses.is_dataclass(arg))

        def decode_list(value: Any) -> Any:
            if not isinstance(value, list):
                raise _WrongType(f"expected a list, found {value!r:.40}")
            if inner is None:
                return value
            if not none_ok and any(v is None for v in value):
                raise _WrongType(f"expected a list of {arg.__name__} tables, found a None in it")
            return [None if v is None else inner(v) for v in value]

        return decode_list
    return _scalar_check(tp)


def event_from_dict(data: dict[str, Any]) -> Event:
    """Inverse of ``Event.to_dict``. Unknown fields are ignored (an older reader of a newer
    minor version); a newer schema version or a malformed field raises EventSchemaError, an
    unknown kind its subclass UnknownEventKind (readers skip those: a newer minor version)."""
    version = data.get("v", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise EventSchemaError(
            f"event schema version {version!r} is newer than this tool's ({SCHEMA_VERSION})"
        )
    kind = data.get("kind")
    cls = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise UnknownEventKind(kind)
    decoder = _compile(typing.cast(Any, cls))  # a type is hashable; mypy reads Event's __hash__ = None
    assert decoder is not None
    try:
        return typing.cast(Event, decoder({k: v for k, v in data.items() if k not in ("kind", "v")}))
    except TypeError as exc:
        raise EventSchemaError(f"malformed {kind} event: {exc}") from None
