"""The one contract between the engines, the recorder and the screens.

Every piece of data that reaches a screen or a file travels as one of these events.
Events are msgspec ``Struct``s, one tag per kind (the ``kind`` key of their JSON): typed, encoded
once by msgspec (``to_json``; ``to_dict`` for the few that need a table) and decoded straight
from JSON bytes (``event_from_json``; ``event_from_dict`` for a table already parsed), and
versioned by ``SCHEMA_VERSION``. Rules that keep the contract small and stable:

* every event carries ``ts`` (UNIX wall-clock seconds, set by the producer) so that replay and
  snapshot tests never read the clock;
* values that a source cannot give are ``None`` ("not available"), never 0 or -1;
* durations inside events are in seconds (floats), sizes in bytes, rates per second;
* a new optional field with a default is a minor change (same ``SCHEMA_VERSION``); a removed
  or renamed field bumps it. Readers reject events of a newer version than they know.

A new kind: a ``Struct`` subclass of ``Event`` with ``tag="its_kind"``, decorated with
``@register`` (docs/architecture.md's recipe "An event kind").
"""

from __future__ import annotations

import functools
import json
import operator
import re
import time
import types
import typing
from typing import Any, ClassVar, Literal

import msgspec
from msgspec import Struct, field

SCHEMA_VERSION = 1


class EventSchemaError(ValueError):
    """A serialised event that this version of the contract cannot read."""


class UnknownEventKind(EventSchemaError):
    """An event kind this version does not know: a reader of a newer minor version's recording
    skips it (and counts it) instead of failing."""

    def __init__(self, kind: object) -> None:
        super().__init__(f"unknown event kind {kind!r}")
        self.event_kind = kind


# --------------------------------------------------------------------------- statuses
# The words events use for how a thing ended; recordings carry them as written, and a reader
# refuses another word as a malformed event.

# contended: others took more than load.contended_percent of the CPU (read as unstable);
# interrupted: stopped before it was decided
LevelStatus = Literal["stable", "unstable", "contended", "failed", "interrupted"]
SessionStatus = Literal["ok", "failed", "interrupted"]
CheckStatus = Literal["ok", "warn", "fail", "n/a"]  # n/a: could not be measured here
Verdict = Literal["go", "warn", "no-go"]  # warn: go, with warnings


# --------------------------------------------------------------------------- base


class Event(Struct, kw_only=True, tag_field="kind"):
    """The base of every kind. ``kind`` is the subclass's tag (set by ``register``); ``v`` the
    contract's version the event was written at (a field, so that it is encoded and decoded with
    the rest)."""

    kind: ClassVar[str] = "event"
    ts: float = field(default_factory=time.time)
    v: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON's values (a table: "kind", then the fields)."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data

    def to_json(self) -> bytes:
        """The event as JSON; a number that is not finite is written null ("not available")."""
        return _encoder.encode(self)


_REGISTRY: dict[str, type[Event]] = {}


@functools.cache
def _decoder() -> msgspec.json.Decoder[Any]:
    """One decoder for every registered kind, dispatching on the tag (rebuilt when one is added)."""
    return msgspec.json.Decoder(functools.reduce(operator.or_, _REGISTRY.values()))


def register(cls: type[Event]) -> type[Event]:
    """Make ``cls`` a kind readers decode; its ``kind`` is its tag."""
    tag = cls.__struct_config__.tag
    if not isinstance(tag, str) or cls.__struct_config__.tag_field != "kind":
        raise ValueError(f"{cls.__name__}: an event kind is declared as class {cls.__name__}(Event, tag=\"its_kind\")")
    if tag in _REGISTRY:
        raise ValueError(f"duplicate event kind {tag!r}")
    cls.kind = tag
    _REGISTRY[tag] = cls
    _decoder.cache_clear()
    return cls


def event_kinds() -> dict[str, type[Event]]:
    return dict(_REGISTRY)


# error kinds as recordings made before the load engine named them by what happened
# (engine/net/connection.py) spelt them: read as today's names
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


class LatencyBuckets(Struct):
    """A latency distribution that adds across windows and hosts: the counts of HdrHistogram's
    buckets of the samples in ns (engine/analysis/latency_histogram.py, ``digits`` significant
    digits), sparse: ``buckets`` non-zero ones, encoded in ``data`` as
    engine/analysis/histogram_codec.py says (index gaps and counts, varints, zlib, base64)."""

    data: str
    buckets: int
    digits: int = 3


class LatencyStats(Struct):
    """Latency of completed requests, seconds. ``exact`` is False for estimates (live, or
    percentiles read from merged histograms); ``histogram``: the samples' distribution, None
    where not kept (a recording made before it was, or a figure that does not keep one)."""

    count: int
    mean: float | None = None
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    exact: bool = True
    histogram: LatencyBuckets | None = None


class ServerBreakdown(Struct):
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
    # why the times above are None though the server answered (engine/analysis/stream_split.py:
    # a decoupled model's); "": they are Triton's readings
    no_split: str = ""


class NetworkPath(Struct):
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


class StreamStats(Struct):
    """A streaming level's figures (a decoupled model: a stream of responses per request), over
    its merged windows. Times in seconds, measured as the request's latency is (from its
    intended send in rate mode); a response counts as one output token."""

    ttft: LatencyStats  # time to the first response
    itl: LatencyStats  # the gaps between a request's successive responses (count 0: not measured)
    responses_per_request: float  # mean
    output_tokens_per_s: float  # every response of the merged windows over their duration
    tokens_per_s_per_request: float | None = None  # median over requests of (responses - 1) / decode time
    tokens_per_request: float | None = None  # mean output tokens (None: recorded before it, one per response)
    itl_unmeasured: int = 0  # gaps left out of ``itl``: responses that came in one read share its stamp
    itl_note: str | None = None  # why ``itl`` is not measured (most gaps were not), None where it is
    # the prompts' tokens as the server counted them (OpenAI's usage); None: not measured
    input_tokens_per_request: float | None = None
    input_tokens_per_s: float | None = None
    # the token figures are words, not tokens: the server reported no usage for some requests
    tokens_are_words: bool = False
    # of the prompt's tokens, those the server's usage said came from its prefix cache
    # (usage.prompt_tokens_details.cached_tokens), where every answer said; None: not measured
    cached_tokens_per_request: float | None = None


class ServerCache(Struct):
    """An LLM server's own cache over an interval, from its Prometheus /metrics (OpenAI-compatible
    servers: llama.cpp, vLLM, SGLang; engine/openai/server_metrics.py): counters as deltas over the
    interval, gauges as read at its end (a level: the mean over its merged windows). Several
    replicas: every one's figures combined (counters and waiting summed, KV usage their mean and
    max). Each figure None where a server does not publish it or a replica was not read (not
    measured, never 0)."""

    server: str  # whose names were read: "llama.cpp", "vLLM" or "SGLang"
    prompt_tokens: float | None = None  # prompt tokens the server took in (computed and from its cache)
    cached_tokens: float | None = None  # of those, served from its prefix cache
    hit_rate: float | None = None  # cached_tokens / prompt_tokens (None: no prompt over the interval)
    kv_usage: float | None = None  # share of the KV cache in use (0..1); several replicas: their mean
    preemptions: float | None = None  # requests preempted (their KV cache evicted) over the interval
    waiting: float | None = None  # requests waiting for a slot
    # how warm the cache was when the level began: "cold" (the server had taken no prompt before
    # it), "warm from earlier levels", "warm from before this sweep", or "cold: reset before the
    # level" (load.cache_reset); "" for a window, or where the server's counters could not tell
    state: str = ""
    # the fullest replica's KV usage (one server: its own); a level: the highest of its windows'
    kv_usage_max: float | None = None


class SequenceStats(Struct):
    """A sequence model's level (Triton's sequence batcher), over its merged windows: a step's
    latency, the sequence's first step (it sets up the state) apart from its later ones, and the
    sequences that ended. Times in seconds; a figure with no samples is not measured (count 0)."""

    first_step: LatencyStats
    later_steps: LatencyStats
    sequences_per_s: float  # sequences whose last step was answered, over the windows' duration
    sequences: int  # those sequences
    dropped: int = 0  # steps Triton refused because it no longer held their sequence (idle timeout)


class ClientAudit(Struct):
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


class GpuReading(Struct):
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


class GpuLink(Struct):
    """How two GPUs reach each other (NVML topology)."""

    a: str  # uuid
    b: str  # uuid
    nvlink_count: int = 0
    p2p_read: str | None = None  # "ok", "not supported", ... as NVML names it
    p2p_write: str | None = None
    p2p_nvlink: str | None = None
    common_ancestor: str | None = None  # "PIX", "PXB", "PHB", "NODE", "SYS", "NV#", ...


class AllReduceRow(Struct):
    size_bytes: int
    time_s: float  # mean time of one all-reduce
    algbw_gbps: float  # GB/s, GB = 1e9 bytes
    busbw_gbps: float


class StatSummary(Struct):
    """Mean of repeated runs after outlier removal, with a 95 % t-distribution CI."""

    mean: float
    ci_low: float | None
    ci_high: float | None
    n: int
    n_outliers: int = 0
    std: float | None = None


class MergedSource(Struct):
    """One recording that `gpuscale-tui merge` combined into this one: a load host's run."""

    hostname: str
    file: str  # its file name
    session_id: str
    offset_s: float = 0.0  # its first measured window began this long after the earliest host's


# --------------------------------------------------------------------------- session


@register
class SessionStarted(Event, tag="session_started"):
    session_id: str
    profile_name: str
    profile: dict[str, Any]  # the validated profile, as a dict (credentials redacted)
    mode: str  # "sweep", "probe", "all"
    host: dict[str, Any] = field(default_factory=dict)  # hostname, cpu model, cores, ram
    versions: dict[str, Any] = field(default_factory=dict)  # ours, python, torch, triton, driver, cuda
    tool_version: str = ""
    merged_from: list[MergedSource] = field(default_factory=list)  # a merged recording's hosts; []: one host


@register
class SessionEnded(Event, tag="session_ended"):
    status: SessionStatus
    error: str | None = None
    exit_code: int = 0


@register
class PhaseChanged(Event, tag="phase"):
    """Coarse progress for humans: "starting server", "warmup", "sweep", "probe", ..."""

    phase: str
    detail: str = ""


@register
class ServerReady(Event, tag="server_ready"):
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
    transport: str = ""  # load.transport the sweep sends over; "": a recording made before it was said


@register
class ServerStopped(Event, tag="server_stopped"):
    reason: str = ""
    exit_code: int | None = None


# --------------------------------------------------------------------------- load engine


@register
class LevelStarted(Event, tag="level_started"):
    mode: str  # "concurrency" or "rate"
    level: float  # in-flight requests, or requests/s
    index: int  # 0-based position in the sweep
    total: int  # levels in the sweep
    batch_size: int = 1
    arrival: str | None = None  # rate mode: "constant", "poisson" or "gamma"
    workers: int = 1
    slo_search: bool = False  # a level the latency-target search added after the planned ones
    trial: int = 1  # 2, 3, ...: the level measured again (unstable, contended or out of line)


@register
class WindowResult(Event, tag="window"):
    """One measurement window of one level (requests attributed by completion time)."""

    ADDITIVE: ClassVar[tuple[str, ...]] = ("requests", "errors", "throughput_rps", "throughput_ips")  # engine/analysis/summed.py
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
    stream: StreamStats | None = None  # a streaming transport's figures over the window; None: unary
    sequence: SequenceStats | None = None  # a sequence model's figures over the window; None: not one
    # shares of the cores this process may use over the window (engine/cpu_share.py): taken by
    # processes neither ours nor the server's, and stolen by the hypervisor; None: not measured
    others_cpu: float | None = None
    steal: float | None = None
    cache: ServerCache | None = None  # the LLM server's cache over the window; None: not measured

    def __post_init__(self) -> None:
        self.errors_by_kind = _current_kinds(self.errors_by_kind)


class HostResult(Struct):
    """One client host's share of a level driven from several hosts (engine/multihost/): its
    figures over the level's merged windows (its throughputs add up to the level's), its clock
    offset to the head, and why it is missing (\"\" when it is not)."""

    ADDITIVE: ClassVar[tuple[str, ...]] = ("requests", "errors", "throughput_rps", "throughput_ips")  # engine/analysis/summed.py
    rank: int
    name: str  # the host's name as it gave it
    connections: int = 0  # concurrency mode: its share of the level (rate mode: 0)
    target_rate: float | None = None  # rate mode: its share of the level's rate
    requests: int = 0
    errors: int = 0
    throughput_rps: float = 0.0
    throughput_ips: float = 0.0
    latency: LatencyStats = field(default_factory=lambda: LatencyStats(count=0))
    audit: ClientAudit = field(default_factory=ClientAudit)
    clock_offset_s: float | None = None  # its clock minus the head's (NTP-style, min round trip)
    clock_rtt_s: float | None = None  # the round trip of that measurement
    missing: str = ""


class EndpointResult(Struct):
    """One server's share of a level spread over several (engine/triton/endpoints.py): its figures
    over the level's merged windows (they add up to the level's), its errors over every measured
    window. ``failed``: a measured window in which it answered nothing and failed requests."""

    ADDITIVE: ClassVar[tuple[str, ...]] = ("requests", "errors", "throughput_rps", "throughput_ips", "connections", "target_rate")  # engine/analysis/summed.py
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
class LevelResult(Event, tag="level_result"):
    """A level's merged result: the stable windows, exact percentiles."""

    ADDITIVE: ClassVar[tuple[str, ...]] = ("requests", "errors", "throughput_rps", "throughput_ips", "target_rate")  # engine/analysis/summed.py
    mode: str
    level: float
    index: int
    # "stable", "unstable", "contended" (others took more than load.contended_percent of the CPU:
    # read as unstable), "failed", "interrupted" (stopped before it was decided)
    status: LevelStatus
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
    # why the level is not a measurement of every endpoint (one of them answered nothing in some
    # measured window), one line; "" when it is. A degraded level is no basis for a decision.
    degraded: str = ""
    stream: StreamStats | None = None  # a streaming transport's figures; None: a unary sweep
    sequence: SequenceStats | None = None  # a sequence model's figures; None: not a sequence model
    # over the measured windows (WindowResult's): the largest share others took, the mean steal
    others_cpu: float | None = None
    steal: float | None = None
    trial: int = 1  # which measurement of this level this is; the last one published stands
    remeasure: str = ""  # why the level is measured again ("" when it is not)
    hosts: list[HostResult] = field(default_factory=list)  # a level driven from several hosts: one each
    cache: ServerCache | None = None  # the LLM server's cache over the merged windows; None: not measured

    def __post_init__(self) -> None:
        self.errors_by_kind = _current_kinds(self.errors_by_kind)


@register
class InputDataUsed(Event, tag="input_data"):
    """The input data a sweep sends (load.input_data), read before its first level: which file
    or folder, its digest, and the requests its entries make."""

    path: str
    sha256: str  # of the file; of a folder, its files' relative paths and bytes in sorted order
    entries: int
    requests: int  # the distinct requests the entries make at the sweep's batch size
    source: str = "json"  # "json", "jsonl" (prompts, one per line), "mooncake" or "azure" (traces) or "folder"
    validated: bool = False  # whether it has validation data (answers compared with it)


@register
class SweepFinished(Event, tag="sweep_finished"):
    levels: int
    stable: int
    failed: int
    saturation_level: float | None = None
    degraded: int = 0  # levels that measured part of the servers (LevelResult.degraded)


class WireLevel(Struct):
    """One level of the wire check: the request path alone (see WireCeiling)."""

    level: float
    status: LevelStatus
    throughput_ips: float  # items (images) / s
    throughput_rps: float
    p50: float | None = None  # seconds
    p99: float | None = None
    errors: int = 0
    client_bound: bool = False  # the load generator's own audit flagged this level


@register
class WireCeiling(Event, tag="wire_ceiling"):
    """The wire's ceiling: after a sweep, the same levels sent to the no-compute ``wire`` model
    with the model-under-test's bytes per item, the same transport and batch size: what the
    request path alone carries (client, HTTP body or shared memory, Triton's front end and
    batcher, the backend's hand-over)."""

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
    peak_ips: float | None = None  # the highest throughput of a sound level (engine/analysis/sound.py)
    peak_level: float | None = None
    peak_client_bound: bool = False  # the peak level measured the load generator, not the path
    saturated: bool = False  # the wire's throughput stopped rising within the levels run
    not_decided: str = ""  # why there is no peak: no sound level, in words


# --------------------------------------------------------------------------- telemetry


@register
class GpuSample(Event, tag="gpu_sample"):
    gpus: list[GpuReading]
    source: str  # "nvml" or "triton"
    interval_s: float  # the source's own resolution


@register
class HostSample(Event, tag="host_sample"):
    cpu_percent: float | None
    per_core: list[float | None] = field(default_factory=list)  # None: a core the sampler could not read (not available)
    mem_used: int | None = None
    mem_total: int | None = None
    own_cpu_percent: float | None = None  # this tool's processes (session + load workers)
    server_cpu_percent: float | None = None  # the embedded server's processes (100 = one core); None: not ours
    net_tx_bps: float | None = None
    net_rx_bps: float | None = None
    interval_s: float | None = None  # the seconds these figures cover, up to ts; None: not recorded


@register
class Topology(Event, tag="topology"):
    gpus: list[dict[str, Any]]  # uuid, index, name, bus_id, pcie gen/width, nvlink links up
    links: list[GpuLink] = field(default_factory=list)
    summary: str = ""  # e.g. "4x NVIDIA H200, NVLink (NV18) between all pairs"


# --------------------------------------------------------------------------- box check


class CheckItem(Struct):
    """One verdict of `gpuscale-tui check`: what was measured against what was expected."""

    name: str  # "pcie link", "power limit", "p2p", "h2d bandwidth", "ram per gpu", ...
    scope: str  # "GPU 0", "GPU 0-1", "all GPUs", "host", "profile"
    status: CheckStatus
    measured: str = ""
    expected: str = ""
    note: str = ""  # why it matters or what to do, one line


@register
class BoxCheck(Event, tag="box_check"):
    """Is this box fit for the run: per-item verdicts and one go/no-go line."""

    verdict: Verdict
    summary: str  # the one line: "NO-GO: 1 fail, 2 warn: GPU 2 PCIe link x4 (expected x16)"
    items: list[CheckItem] = field(default_factory=list)
    gpus: int = 0  # GPUs checked: those of NVML's that CUDA_VISIBLE_DEVICES leaves
    facts: dict[str, Any] = field(default_factory=dict)  # the measured facts, as plain data
    duration_s: float = 0.0
    # "": measured for this session; otherwise where it was measured, e.g. "the study's check, taken
    # before config 1x": a study checks the box once and records that result in every config
    reused: str = ""


# --------------------------------------------------------------------------- training probe


@register
class ProbeResult(Event, tag="probe_result"):
    """One training configuration (model x strategy x world size x batch), repeated runs."""

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
    gpu_util: list[float | None] = field(default_factory=list)  # per rank, mean over the run
    p_value: float | None = None  # Welch two-tailed vs world size 1
    significant: bool | None = None
    warmup_steps: int = 0
    steps: int = 0
    repeats: int = 0
    # the world-size-1 result compared with (seed 002's "single -> multi" columns); None/[] if none
    baseline_samples_per_s: StatSummary | None = None
    baseline_step_time_s: float | None = None
    baseline_gpu_util: list[float | None] = field(default_factory=list)


@register
class AllReduceResult(Event, tag="allreduce_result"):
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
class StudyStarted(Event, tag="study_started"):
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
class StudyVariantStarted(Event, tag="study_variant_started"):
    variant: str
    position: int  # 0-based, in StudyStarted.variants
    how: str = ""  # "embedded server restarted", "loaded through the repository API", ...


@register
class StudyVariantFinished(Event, tag="study_variant_finished"):
    variant: str
    position: int
    status: SessionStatus  # the variant session's
    exit_code: int
    recording: str | None = None
    error: str | None = None


@register
class StudyFinished(Event, tag="study_finished"):
    status: SessionStatus
    finished: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    index_path: str | None = None
    exit_code: int = 0
    # scale out or scale up, one line per scale-out config (engine/analysis/scale_out.py)
    scale_answers: list[str] = field(default_factory=list)
    answer: str = ""  # the study's one line: "answer: ..." (engine/study/figures.py)
    # larger configs predicted from smaller ones, checked where measured (engine/analysis/scaling_forecast.py)
    forecast_lines: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- messages


@register
class Warning(Event, tag="warning"):  # noqa: A001 - the name is the contract's
    source: str  # "telemetry", "load", "server", "probe", "record", ...
    message: str
    key: str = ""  # stable id so that consumers can show a warning once


@register
class Error(Event, tag="error"):
    source: str
    message: str  # one line, for people
    fatal: bool = False
    detail: str = ""  # e.g. a traceback of an internal error: kept in the recording, not printed


# --------------------------------------------------------------------------- replay


@register
class ReplayReset(Event, tag="replay_reset"):
    """Replay seeks backwards: consumers clear their state; the events up to ``position_s``
    (seconds from the recording's start) follow at once. Published by the replay source only,
    never recorded."""

    position_s: float = 0.0


# --------------------------------------------------------------------------- decoding
# One decoder for every reader (recordings, replay, probe lines, JSON exports): msgspec rebuilds
# the event's Struct straight from its JSON, checking each field against the type declared above.

MAX_MAGNITUDE = 1e100  # no measurement is this large; beyond it, arithmetic in the reports overflows to inf
# a float written past MAX_MAGNITUDE, as msgspec writes it ("1e308," at the end of a number): a
# literal first, so the search is quick (a pattern without one costs more than the decoding), and
# the end of the number after it, so that a hex id ("GPU-e3e70682") rarely sends a GPU sample down
# the slow path; ints are not screened
# (json.dumps, which wrote the rows of recordings made before msgspec did, writes "1e+308")
_HUGE_FLOAT = re.compile(rb"e\+?[0-9]{3}[,\]}]")
_HUGE_FLOAT_TEXT = re.compile(_HUGE_FLOAT.pattern.decode())
_PATH = re.compile(r" - at `\$(.*)`$")
_PATH_PART = re.compile(r"\.([^.\[]+)|\[([^\]]*)\]")
_TYPE_WORDS = {"float": "a number", "int": "a number", "str": "a str", "bool": "a bool", "object": "a table",
               "array": "a list"}
_json = msgspec.json.Encoder()
_encoder = _json  # the events' own: nan and inf are written null


def _is_table(tp: Any) -> bool:
    """A nested record or an event (a Struct), as opposed to a value."""
    return isinstance(tp, type) and issubclass(tp, Struct)


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _huge(value: Any, tp: Any, path: str) -> str | None:
    """The path of a number past MAX_MAGNITUDE where ``tp`` declares a number (a table of any
    values, like the recorded profile, is used as it is), or None."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        tp = args[0]
    if tp in (int, float):
        big = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > MAX_MAGNITUDE
        return path if big else None
    origin = typing.get_origin(tp)
    if origin is list and isinstance(value, list):
        items: Any = ((str(i), v, typing.get_args(tp)[0]) for i, v in enumerate(value))
    elif origin is dict and isinstance(value, dict):
        items = ((str(k), v, typing.get_args(tp)[1]) for k, v in value.items())
    elif _is_table(tp) and isinstance(value, dict):
        hints = _type_hints(tp)
        items = ((k, v, hints[k]) for k, v in value.items() if k in hints)
    else:
        return None
    for key, item, inner in items:
        if (found := _huge(item, inner, f"{path}.{key}" if path else key)) is not None:
            return found
    return None


def _at(data: Any, parts: list[str]) -> Any:
    """The value at a msgspec path in the JSON tree it was found in (None where there is none)."""
    for part in parts:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def _declared_at(cls: type, parts: list[str]) -> Any:
    """The declared type at a path of field names and list indexes (None where it is not known)."""
    tp: Any = cls
    for part in parts:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
            tp = args[0]
        if typing.get_origin(tp) is list and part.isdigit():
            tp = typing.get_args(tp)[0]
        elif _is_table(tp):
            tp = _type_hints(tp).get(part)
        else:
            return None
    return tp


def _reason(error: msgspec.ValidationError, cls: type, body: dict[str, Any]) -> str:
    """msgspec's finding ("Expected `float`, got `null` - at `$.throughput_ips`") in the words of
    the one-line errors: the field, what was expected and the value as the file holds it."""
    text = str(error)
    match = _PATH.search(text)
    if match is None:
        return text.replace("Object missing required field", "missing field")
    parts = [a or b for a, b in _PATH_PART.findall(match.group(1))]
    found = _at(body, parts)
    table = _declared_at(cls, parts)
    if parts and parts[-1].isdigit() and _is_table(table):  # a hole in a list of tables
        return f"{'.'.join(parts[:-1])}: expected a list of {getattr(table, '__name__', 'event')} tables, found {found!r:.40} in it"
    expected = text[: match.start()]
    word = re.match(r"Expected `(\w+)", expected)
    if expected.startswith("Invalid enum value"):  # a status or verdict this version has no word for
        words = "one of " + ", ".join(repr(w) for w in typing.get_args(table))
    else:
        words = _TYPE_WORDS.get(word.group(1), f"a {word.group(1)}") if word else expected.lower()
    return f"{'.'.join(parts)}: expected {words}, found {found!r:.40}"


def _integral_as_int(value: Any) -> Any:
    """3.0 as 3 in a JSON tree: an int field holding 3.0 was readable before (numbers stay numbers)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral_as_int(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral_as_int(v) for v in value]
    return value


def event_from_dict(data: dict[str, Any]) -> Event:
    """Inverse of ``Event.to_dict`` (probe lines, the load hosts' messages, a JSON export's
    tables; a recording's rows go through ``event_from_json``). Unknown fields are ignored (an older reader of a newer
    minor version); a number that is not finite reads as None ("not available", as the recorder
    writes it). A newer schema version or a malformed field raises EventSchemaError, an unknown
    kind its subclass UnknownEventKind (readers skip those: a newer minor version)."""
    version = data.get("v", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise EventSchemaError(
            f"event schema version {version!r} is newer than this tool's ({SCHEMA_VERSION})"
        )
    kind = data.get("kind")
    cls = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise UnknownEventKind(kind)
    body = {k: v for k, v in data.items() if k not in ("kind", "v")}
    try:
        text = _json.encode(body)  # nan and inf become null here
    except (TypeError, ValueError, OverflowError) as exc:  # a value JSON cannot hold
        raise EventSchemaError(f"malformed {kind} event: {exc}") from None
    if _HUGE_FLOAT.search(text) and (path := _huge(body, cls, "")) is not None:
        raise EventSchemaError(f"malformed {kind} event: {path}: expected a number, found {_at(body, path.split('.'))!r:.40}")
    try:
        return msgspec.json.decode(text, type=cls)
    except msgspec.ValidationError as exc:
        if "got `float`" not in str(exc):  # else perhaps an int field holding 3.0: tried below
            raise EventSchemaError(f"malformed {kind} event: {_reason(exc, cls, body)}") from None
    try:
        return msgspec.convert(_integral_as_int(msgspec.json.decode(text)), cls, strict=True)
    except msgspec.ValidationError as exc:
        raise EventSchemaError(f"malformed {kind} event: {_reason(exc, cls, body)}") from None


class NotJson(EventSchemaError):
    """Bytes that are not JSON at all (a corrupt row), as opposed to a malformed event."""


def event_from_json(raw: bytes | str) -> Event:
    """The event a JSON text holds (a recording's row, as written), decoded straight from it; the
    same rules and errors as ``event_from_dict``. The common case is one msgspec decode; a row
    that does not decode (an unknown kind, a newer version, a malformed field, a number past
    MAX_MAGNITUDE, JSON that only Python reads, like NaN) is parsed and read by
    ``event_from_dict``, which says exactly what is wrong. NotJson: not JSON at all."""
    huge = _HUGE_FLOAT.search(raw) if isinstance(raw, bytes) else _HUGE_FLOAT_TEXT.search(raw)
    if huge is None:
        try:
            event: Event = _decoder().decode(raw)
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        else:
            if event.v <= SCHEMA_VERSION:
                event.v = SCHEMA_VERSION  # read as this version's event: written again as one
                return event
    try:
        data = json.loads(raw)
    except ValueError:
        raise NotJson("not JSON") from None
    if not isinstance(data, dict):
        raise EventSchemaError(f"not an event: a JSON {type(data).__name__}, not a table")
    return event_from_dict(data)
