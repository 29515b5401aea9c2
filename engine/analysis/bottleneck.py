"""What limits a sweep, from recorded data by fixed rules, with the figures that support it.

The rules read the decisive level: the saturation point when the sweep reached one (where more
load stopped helping, so whatever limits throughput shows there), else the highest level. In
order, the first that holds is the verdict:

0. host-cpu: the server runs on the measuring host, whose CPUs are >= 90 % busy at the decisive
   level or a higher one (or >= 75 % with our workers waiting for a CPU >= 10 % of the level),
   the GPUs not saturated there: the server's processes, the load
   generator and any other jobs share the same cores, so neither side's figures are its own;
   each party's share comes from the process table (engine/telemetry/host.py), and who took
   the CPU (others, or the server and the load generator) decides the headline and the remedy
   (engine/analysis/host_cpu_share.py); not when a
   measured round trip (>= 1 ms) is half the latency or more there (a server on this host
   behind a proxy or tunnel): most of each request's time is then on the wire, where a busy
   CPU does not reach (rule 2 decides);
1. client-bound: the load generator's own audit says so (its CPU, event-loop lag, late sends),
   at the decisive level or any higher one;
   request-path (with a wire check, engine/analysis/wire.py): the model's peak is within 15 % of
   what the no-compute wire model carried with the same bytes, transport and batch size (a
   wire that saturated, not client-bound): the request path, not the model, is the limit;
2. network: client latency minus the server's own request time is over half the latency. That
   gap is time outside Triton's model statistics: network, Triton's HTTP front end (reading
   and writing request bodies, its thread pool) and client I/O. It is not the client's own CPU
   time, which the audit measures directly (a large gap with idle load workers is not
   client-bound; docs/results/design_notes.md). Where the round trip was measured
   (engine/triton/path_probe.py), the gap is set against it plus the request's transfer time at
   the measured bandwidth (none measured: said so, not counted): when they make up at least
   half of the gap, the verdict names the network and its round trip. A sweep that never
   saturated gets this verdict too when that round trip (>= 1 ms) explains most of its latency:
   more load then only hides the path, it never reaches the server's limit;
3. with GPU telemetry: GPUs at >= 80 % mean utilization -> compute (the GPUs are the limit);
   else queue time >= half of the server's time -> queueing (requests wait for a model instance
   while GPUs have room); else -> GPUs not saturated (the limit is outside the GPUs);
4. without GPU telemetry: queue >= half the server's time -> queueing, else compute.
When the sweep never saturated, the verdict is "not saturated": no limit was reached.
Further findings (GPUs used unevenly, throughput falling past the peak, the host out of CPU) are
listed as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean

from engine import format as fmt
from engine.analysis.host_cpu_share import host_cpu_words
from engine.analysis.saturation import Saturation
from engine.analysis.wire import Assessment, level_text, wire_notes
from engine.events import LevelResult, WireCeiling

NETWORK_SHARE_LIMIT = 0.5
PATH_EXPLAINS = 0.5  # round trip + transfer make up this share of the gap: the path explains it
PATH_RTT_FLOOR_S = 0.001  # shorter round trips (loopback, one LAN switch) never explain a sweep
QUEUE_SHARE_LIMIT = 0.5
GPU_BUSY_PCT = 80.0
GPU_SPREAD_PCT = 30.0  # busiest minus idlest GPU, percentage points
OVERLOAD_DROP = 0.10  # throughput at the highest level this far below the peak
HOST_CPU_BUSY_PCT = 90.0  # the measuring host itself is out of CPU
# ...or nearly so, with our workers measured waiting in the run queue for a core: a level's mean
# host CPU under-reads a host that is full at its peaks (docs/results/host_cpu_verdict_h200.md)
HOST_CPU_CONTENDED_PCT = 75.0
CPU_WAIT_CONTENDED = 0.10  # a worker runnable but waiting for a CPU this share of the level

VERDICTS = ("host-cpu", "client-bound", "request-path", "network", "queueing", "compute", "gpus-not-saturated", "not-saturated", "unknown")


@dataclass(frozen=True)
class LevelEvidence:
    level: float
    throughput: float
    latency_mean: float | None  # seconds
    queue: float | None = None  # seconds per request (server statistics)
    compute: float | None = None  # compute_input + compute_infer + compute_output
    client_minus_server: float | None = None
    no_split: str = ""  # why queue and compute are not given though the server answered (a decoupled model)
    client_bound: bool = False
    client_overhead: float | None = None  # fraction of latency spent in the client
    client_cpu_percent: float | None = None
    client_reasons: tuple[str, ...] = ()
    gpu_util: dict[str, float] = field(default_factory=dict)  # GPU -> mean utilization %
    host_cpu_percent: float | None = None  # the measuring host's CPU (all cores) during the level
    own_cpu_percent: float | None = None  # our processes (session, load workers); 100 = one core
    server_cpu_percent: float | None = None  # the embedded server's processes; 100 = one core
    client_cpu_wait: float | None = None  # the largest share of the level a worker waited for a CPU
    rtt: float | None = None  # seconds: the round trip to the server (events.NetworkPath)
    rtt_method: str = ""
    request_bytes: int = 0  # one request on the wire
    bandwidth: float | None = None  # bytes/s along the path; None: not measured
    sound: bool = True  # engine/analysis/sound.py: only sound levels make the peak a finding names


@dataclass(frozen=True)
class Finding:
    kind: str
    text: str
    advice: str = ""  # the report's advice line for it, where the finding words its own


@dataclass(frozen=True)
class Verdict:
    kind: str  # one of VERDICTS
    summary: str
    evidence: list[str]
    level: float | None  # the decisive level
    findings: list[Finding] = field(default_factory=list)  # further observations
    advice: str = ""  # the report's advice, where the verdict's evidence decides it (host-cpu)


def evidence_from_result(result: LevelResult, gpu_util: dict[str, float] | None = None,
                         host_cpu_percent: float | None = None, own_cpu_percent: float | None = None,
                         server_cpu_percent: float | None = None) -> LevelEvidence:
    s = result.server
    compute = None
    if s is not None and None not in (s.compute_input, s.compute_infer, s.compute_output):
        compute = s.compute_input + s.compute_infer + s.compute_output  # type: ignore[operator]  # all three are set when server stats are
    return LevelEvidence(
        level=float(result.level), throughput=result.throughput_ips, latency_mean=result.latency.mean,
        queue=s.queue if s else None, compute=compute,
        client_minus_server=s.client_minus_server if s else None,
        no_split=s.no_split if s else "",
        client_bound=result.audit.client_bound, client_overhead=result.audit.overhead_fraction,
        client_cpu_percent=result.audit.cpu_percent, client_reasons=tuple(result.audit.reasons),
        gpu_util=dict(gpu_util or {}), host_cpu_percent=host_cpu_percent,
        own_cpu_percent=own_cpu_percent, server_cpu_percent=server_cpu_percent,
        client_cpu_wait=result.audit.cpu_wait_fraction,
        rtt=result.network.rtt if result.network else None,
        rtt_method=result.network.rtt_method if result.network else "",
        request_bytes=result.network.request_bytes if result.network else 0,
    )


def _ms(seconds: float) -> str:
    return f"{fmt.ms(seconds)} ms"


def _in_use(gpu_util: dict[str, float], gpus_in_config: int | None) -> dict[str, float]:
    """The GPUs the model config spreads over: with a 2x config on a 4-GPU box, the two busiest
    (the other two idle by design and say nothing about the bottleneck)."""
    if gpus_in_config is None or gpus_in_config >= len(gpu_util):
        return gpu_util
    ranked = sorted(gpu_util.items(), key=lambda kv: kv[1], reverse=True)
    return dict(ranked[:max(gpus_in_config, 1)])


@dataclass(frozen=True)
class CpuShares:
    """The host's CPU at one level, split by party, each in % of the whole host (all cores)."""

    busy: float
    server: float | None  # None: not recorded (a remote server, or an older recording)
    ours: float | None
    others: float | None  # busy minus the two above (other jobs, the kernel's own work)

    def describe(self, cores: int | None) -> str:
        host = f"the host's {cores} cores" if cores else "the host's CPUs"
        if self.server is None or self.ours is None or self.others is None:
            known = f": our load generator {fmt.percent_points(self.ours)}" if self.ours is not None else ""
            return f"{host} {fmt.percent_points(self.busy)} busy{known} (the server's share was not recorded)"
        return (f"{host} {fmt.percent_points(self.busy)} busy: the server's processes "
                f"{fmt.percent_points(self.server)}, our load generator {fmt.percent_points(self.ours)}, "
                f"others {fmt.percent_points(self.others)}")


def cpu_shares(e: LevelEvidence, cores: int | None) -> CpuShares | None:
    """The host's busy share split into the server's processes, ours and the rest. Per-process
    figures are in % of one core; dividing by the cores puts them on the host's scale."""
    if e.host_cpu_percent is None:
        return None
    if not cores or cores <= 0:
        return CpuShares(e.host_cpu_percent, None, None, None)

    def share(percent_of_core: float | None) -> float | None:
        return None if percent_of_core is None else min(100.0, percent_of_core / cores)

    server, ours = share(e.server_cpu_percent), share(e.own_cpu_percent)
    others = max(0.0, e.host_cpu_percent - server - ours) if server is not None and ours is not None else None
    return CpuShares(e.host_cpu_percent, server, ours, others)


def host_full(e: LevelEvidence) -> bool:
    """The host's CPUs are full: busy to the brim, or nearly so with our workers queued for a core."""
    if e.host_cpu_percent is None:
        return False
    if e.host_cpu_percent >= HOST_CPU_BUSY_PCT:
        return True
    return (e.host_cpu_percent >= HOST_CPU_CONTENDED_PCT and e.client_cpu_wait is not None
            and e.client_cpu_wait >= CPU_WAIT_CONTENDED)


def _host_cpu_verdict(levels: Sequence[LevelEvidence], ev: LevelEvidence, cores: int | None,
                      findings: list[Finding]) -> Verdict | None:
    """The server shares this host and the host's CPUs are full where the sweep stopped gaining."""
    for e in (x for x in levels if x.level >= ev.level):
        if not host_full(e):
            continue
        if e.gpu_util and fmean(e.gpu_util.values()) >= GPU_BUSY_PCT:
            return None  # the GPUs are full: the host's CPU is not what holds them back
        shares = cpu_shares(e, cores)
        # who took the CPU decides the headline and the remedy (engine/analysis/host_cpu_share.py)
        words = host_cpu_words(*((shares.server, shares.ours, shares.others) if shares else (None, None, None)))
        evidence = [f"at concurrency {e.level:g}, {shares.describe(cores) if shares else ''}"]
        if e.client_bound:
            evidence.append("the load generator's audit flagged this level as client-bound: on a full host it "
                            "waits for the same cores the server needs, so that flag alone does not blame it")
        evidence.append(words.next_step)
        rest = [f for f in findings if f.kind != "host-cpu"]  # the verdict says it
        return Verdict("host-cpu", words.summary, evidence, e.level, rest, advice=words.advice)
    return None


def diagnose(levels: Sequence[LevelEvidence], saturation: Saturation | None,
             gpus_in_config: int | None = None, wire: WireCeiling | None = None,
             assessment: Assessment | None = None, server_local: bool = False,
             host_cores: int | None = None) -> Verdict:
    """``gpus_in_config``: N of the config variant ("2x" -> 2); None when unknown (all GPUs seen count).
    ``wire``: the session's wire check, if it ran; ``assessment``: the wire against the sweep's
    sound peak (engine.analysis.wire.assess), which the evidence's levels, sound or not, never replace.
    ``server_local``: the server runs on the measuring host; ``host_cores``: that host's CPUs."""
    levels = [replace(e, gpu_util=_in_use(e.gpu_util, gpus_in_config)) for e in sorted(levels, key=lambda e: e.level)]
    if not levels:
        return Verdict("unknown", "no level produced a result", [], None)
    reached = saturation is not None and saturation.reached
    decisive_level = saturation.level if reached and saturation is not None else levels[-1].level
    ev = next(e for e in levels if e.level == decisive_level)
    at = f"at concurrency {ev.level:g}"
    findings = _findings(levels, ev, host_cores)
    if wire is not None and assessment is not None:
        findings.append(Finding("wire", assessment.line))

    if server_local and not _path_dominates(ev) and \
            (verdict := _host_cpu_verdict(levels, ev, host_cores, findings)) is not None:
        return verdict

    for e in (x for x in levels if x.level >= ev.level):
        if e.client_bound:
            evidence = []
            if e.client_cpu_percent is not None:
                evidence.append(f"load workers at {fmt.percent_points(e.client_cpu_percent)} CPU (100 = one core)")
            evidence += list(e.client_reasons)
            return Verdict("client-bound", "the load generator, not the server, limits throughput: "
                           "these figures understate the server", evidence, ev.level, findings)

    if wire is not None and assessment is not None and assessment.at_limit:
        findings = [f for f in findings if f.kind != "wire"]  # the verdict says it
        mode, peak = wire.mode, assessment.model_peak_ips or 0.0
        capacity = assessment.capacity
        evidence = [
            f"the model peaked at {fmt.rate(peak)} images/s at {level_text(mode, assessment.model_peak_level or 0)}; "
            f"the wire model, same bytes, transport and batch, at {fmt.rate(wire.peak_ips or 0)} images/s at "
            f"{level_text(mode, wire.peak_level or 0)} ({fmt.percent(peak / (wire.peak_ips or 1))} of it)",
            capacity.describe(mode) if capacity is not None else
            "no server statistics at the peak to say what the model's instances would do",
            *wire_notes(wire),
        ]
        return Verdict("request-path", assessment.line, evidence, ev.level, findings)

    if not reached:
        evidence = [saturation.describe()] if saturation else []
        network = _network_verdict(ev, at, findings, evidence)
        if network is not None and _path_explains(ev) and _path_dominates(ev):
            return replace(network, summary=network.summary + "; throughput still rises with load: more "
                           "concurrency hides the round trip without reaching the server's limit")
        evidence += _server_evidence(ev, at)
        return Verdict("not-saturated", "no limit reached: throughput still rising at the highest load; "
                       "extend the concurrency sweep", evidence, ev.level, findings)

    if (network := _network_verdict(ev, at, findings)) is not None:
        return network

    if ev.queue is None or ev.compute is None:
        return Verdict("unknown", ev.no_split or "no server statistics to split queue from compute",
                       [f"throughput saturates {at}"], ev.level, findings)
    server_time = ev.queue + ev.compute
    queue_share = ev.queue / server_time if server_time > 0 else 0.0
    split = f"queue {_ms(ev.queue)} vs compute {_ms(ev.compute)} per request {at} (queue {fmt.percent(queue_share)})"

    if ev.gpu_util:
        util = fmean(ev.gpu_util.values())
        count = len(ev.gpu_util)
        busy = f"GPUs {fmt.percent_points(util)} busy on average {at} ({count} GPU{'s' if count != 1 else ''})"
        if util >= GPU_BUSY_PCT:
            return Verdict("compute", "the GPUs are saturated: extra load only waits in the queue",
                           [busy, split], ev.level, findings)
        if queue_share >= QUEUE_SHARE_LIMIT:
            return Verdict("queueing", "requests wait in Triton's queue while the GPUs have room: "
                           "too few model instances or batching settings hold them back", [split, busy],
                           ev.level, findings)
        return Verdict("gpus-not-saturated", "the GPUs are not saturated and requests barely queue: the limit "
                       "is outside the GPUs (server CPU side, PCIe, backend)", [busy, split], ev.level, findings)

    if queue_share >= QUEUE_SHARE_LIMIT:
        return Verdict("queueing", "requests spend most of the server's time waiting in its queue "
                       "(no GPU telemetry to tell busy devices from idle ones)", [split], ev.level, findings)
    return Verdict("compute", "model execution dominates the server's time (no GPU telemetry)", [split],
                   ev.level, findings)


def _path_time(e: LevelEvidence) -> tuple[float, str] | None:
    """What the path accounts for per request (round trip + transfer) and how that was reached;
    None when the round trip was not measured."""
    if e.rtt is None:
        return None
    how = f"a {_ms(e.rtt)} round trip ({e.rtt_method or 'measured'})"
    if e.bandwidth and e.request_bytes:
        transfer = e.request_bytes / e.bandwidth
        return e.rtt + transfer, (f"{how} + {_ms(transfer)} to send {fmt.body_size(e.request_bytes)} at "
                                  f"{fmt.bytes_rate(e.bandwidth)}")
    return e.rtt, f"{how}; bandwidth not measured, so sending the request's bytes is not counted"


def _path_explains(e: LevelEvidence) -> bool:
    path = _path_time(e)
    return path is not None and e.client_minus_server is not None and path[0] >= PATH_EXPLAINS * e.client_minus_server


def _path_dominates(e: LevelEvidence) -> bool:
    """A measured round trip of at least PATH_RTT_FLOOR_S that, with the transfer, is half the
    latency or more."""
    path = _path_time(e)
    return (path is not None and e.rtt is not None and e.rtt >= PATH_RTT_FLOOR_S and bool(e.latency_mean)
            and path[0] >= NETWORK_SHARE_LIMIT * (e.latency_mean or 0.0))


def _network_verdict(ev: LevelEvidence, at: str, findings: list[Finding],
                     lead: Sequence[str] = ()) -> Verdict | None:
    """Rule 2: the time outside the server's statistics is over half the latency; it names the
    network when the measured path makes up at least PATH_EXPLAINS of that time."""
    gap, latency = ev.client_minus_server, ev.latency_mean
    if gap is None or not latency or gap / latency <= NETWORK_SHARE_LIMIT:
        return None
    evidence = [*lead, f"{_ms(gap)} of {_ms(latency)} mean latency is spent outside the server {at} "
                       f"({fmt.percent(gap / latency)})"]
    path = _path_time(ev)
    if path is not None and ev.rtt is not None and _path_explains(ev):
        evidence.append(f"the path explains {_ms(min(path[0], gap))} of it: {path[1]}")
        return Verdict("network", f"the network: the client is {_ms(ev.rtt)} from the server (round trip "
                       f"by {ev.rtt_method or 'measurement'}), which explains the time outside Triton's statistics",
                       evidence, ev.level, findings)
    if path is not None:
        evidence.append(f"the path explains only {_ms(path[0])} of it: {path[1]}; the rest is the HTTP front "
                        "end, request/response bodies or client I/O")
    return Verdict("network", "time outside Triton's model statistics (network, HTTP front end, "
                   "request/response bodies) dominates latency", evidence, ev.level, findings)


def _server_evidence(ev: LevelEvidence, at: str) -> list[str]:
    out = []
    if ev.queue is not None and ev.compute is not None:
        out.append(f"queue {_ms(ev.queue)} vs compute {_ms(ev.compute)} per request {at}")
    if ev.gpu_util:
        out.append(f"GPUs {fmt.percent_points(fmean(ev.gpu_util.values()))} busy on average {at}")
    return out


def _findings(levels: Sequence[LevelEvidence], ev: LevelEvidence, cores: int | None = None) -> list[Finding]:
    out: list[Finding] = []
    if len(ev.gpu_util) > 1:
        busiest = max(ev.gpu_util.items(), key=lambda kv: kv[1])
        idlest = min(ev.gpu_util.items(), key=lambda kv: kv[1])
        if busiest[1] - idlest[1] >= GPU_SPREAD_PCT:
            out.append(Finding("gpu-imbalance", f"GPUs used unevenly at concurrency {ev.level:g}: {busiest[0]} at "
                               f"{fmt.percent_points(busiest[1])} vs {idlest[0]} at {fmt.percent_points(idlest[1])} (check the instance_group "
                               "covers every GPU)"))
    sound = [e for e in levels if e.sound]  # a fall past the peak read from noise is no finding
    best = max(sound, key=lambda e: (e.throughput, -e.level), default=None)
    last = sound[-1] if sound else None
    if best is not None and last is not None and best.throughput > 0 and last is not best and \
            last.throughput < (1 - OVERLOAD_DROP) * best.throughput:
        drop = 1 - last.throughput / best.throughput
        out.append(Finding("overload", f"throughput falls {fmt.percent(drop)} past the peak: {fmt.rate(best.throughput)}/s at "
                           f"{best.level:g} vs {fmt.rate(last.throughput)}/s at {last.level:g}"))
    if ev.host_cpu_percent is not None and ev.host_cpu_percent >= HOST_CPU_BUSY_PCT:
        shares = cpu_shares(ev, cores)
        words = host_cpu_words(*((shares.server, shares.ours, shares.others) if shares else (None, None, None)))
        out.append(Finding("host-cpu", f"the host's CPUs were {fmt.percent_points(ev.host_cpu_percent)} busy at concurrency "
                           f"{ev.level:g}: {words.clause}", words.finding_advice))
    for e in levels:
        if e.level < ev.level and e.client_bound:
            out.append(Finding("client-bound-low", f"the client audit flagged concurrency {e.level:g} as client-bound"))
    return out
