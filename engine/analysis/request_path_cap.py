"""Whether one bound on the request path caps every config of a study: then how many GPUs to
buy is not what the study measured, and its answer says what limits instead.

Every config is served through the same request path: the load generator, the wire or shared
memory, Triton's front end and the host's CPUs. The cap holds when
- every config's sound peak is within TOLERANCE of the highest one (adding GPUs gave nothing),
  and the configs differ in size;
- every config larger than the smallest shows a request-path bound at its peak: the client
  audit flagged it (or a higher level), the host's CPUs were full there, the peak was near the
  wire check's ceiling, or the time outside Triton's statistics dominated latency (the
  bottleneck verdict "network"). A CPU config computes on the host's cores: a full host is then
  its own compute, and a client flagged there waited for those cores (bottleneck.py's host-cpu
  rule), so neither counts;
- and the GPUs of those configs had room at their peaks (below the bottleneck rule's busy mark,
  where it was measured).
The smallest config may be at its own limit: the path then caps every larger one at about what
it already does. Where the host's CPUs were full and other processes took most of them
(engine/analysis/host_cpu_share.py's rule), the answer names them and a quieter box, not a
faster path. The answer line holds the ceiling, the bound and one next step; the line above it
(``line``) and the report hold each config's figures, the bytes and every bound. Pure: the evidence comes in, the verdict and its words go out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine import format as fmt
from engine.analysis.bottleneck import GPU_BUSY_PCT
from engine.transport_table import transport_spec

CROWDED = "other processes on this host took most of its CPU: stop the other work or measure on a quieter box"
TOLERANCE = 0.15  # every config's peak at least this close to the highest one

CLIENT, HOST_CPU, WIRE, OUTSIDE = "client bound", "host CPU full", "at the wire's ceiling", "time outside the server"
BOUNDS = (CLIENT, HOST_CPU, WIRE, OUTSIDE)


@dataclass(frozen=True)
class PeakEvidence:
    """One config at its sound peak, from its recording."""

    variant: str
    units: int  # GPUs (or CPU instances) of the config
    peak: float | None  # items/s at the sound peak; None: no sound peak
    client_bound: bool = False  # the client audit flagged the peak level or a higher one
    client_reasons: tuple[str, ...] = ()  # the audit's reasons at the flagged level
    loop_lag_p99: float | None = None  # seconds, the worst worker at the flagged level
    host_full: bool = False  # the host's CPUs full at the peak (engine/analysis/bottleneck.py's rule)
    host_cpu_percent: float | None = None  # the host's CPU at the peak; None: not measured
    near_wire: bool = False  # the peak near the wire check's ceiling (engine/analysis/wire.py)
    wire_peak: float | None = None  # the wire check's peak; None: no wire check
    outside_server: bool = False  # the bottleneck verdict "network": time outside Triton dominates
    gpu_busy_percent: float | None = None  # mean utilisation of the config's GPUs at the peak; None: not measured
    transport: str = "http"  # load.transport
    request_bytes: int = 0  # one request on the wire; 0: not measured
    on_gpus: bool = True  # the model computes on GPUs (a CPU config's full host is its own compute)
    # others' share of the host (%) where its CPUs were full and other processes took most of them
    # (engine/analysis/host_cpu_share.py); None: they did not, or the shares were not recorded
    host_others_percent: float | None = None

    @property
    def bounds(self) -> tuple[str, ...]:
        """The request-path bounds seen at this config's peak, in BOUNDS order."""
        own_cores = self.host_full and not self.on_gpus  # a CPU model's cores, full: its compute
        seen = {CLIENT: self.client_bound and not own_cores, HOST_CPU: self.host_full and self.on_gpus,
                WIRE: self.near_wire, OUTSIDE: self.outside_server}
        return tuple(b for b in BOUNDS if seen[b])

    def describe(self, items: str = "images") -> str:
        """"2x: peak 9,012 images/s; client bound (loop lag p99 14.2 ms); GPUs 41% busy": the evidence, for a report."""
        parts = []
        bounds = self.bounds
        if CLIENT in bounds:
            why = [f"loop lag p99 {fmt.ms(self.loop_lag_p99)} ms"] if self.loop_lag_p99 is not None else []
            why += list(self.client_reasons[:2])
            parts.append(CLIENT + (f" ({'; '.join(why)})" if why else ""))
        if HOST_CPU in bounds:
            others = (f", others {fmt.percent_points(self.host_others_percent)}"
                      if self.host_others_percent is not None else "")
            parts.append(f"{HOST_CPU} ({fmt.percent_points(self.host_cpu_percent)} busy{others})")
        if WIRE in bounds:
            parts.append(f"{WIRE} ({fmt.rate(self.wire_peak)}/s)")
        if OUTSIDE in bounds:
            parts.append(f"{OUTSIDE} (network, HTTP front end, bodies) over half the latency")
        if not parts:
            parts.append("no request-path bound recorded at its peak")
        if self.on_gpus:
            parts.append(f"GPUs {fmt.percent_points(self.gpu_busy_percent)} busy" if self.gpu_busy_percent is not None
                         else "GPU use not measured")
        return f"{self.variant}: peak {fmt.rate(self.peak)} {items}/s; " + "; ".join(parts)


@dataclass(frozen=True)
class RequestPathCap:
    """The request path caps every config near ``ceiling``: the study's answer is this, not a size."""

    ceiling: float  # the highest peak, items/s
    peaks: tuple[tuple[str, float], ...]  # (variant, peak) of every config
    transports: tuple[str, ...]
    request_bytes: int  # one request on the wire; 0: not measured
    bounds: tuple[tuple[str, tuple[str, ...]], ...]  # (bound, variants where it was seen)
    line: str  # the study's conclusion in full (each config's peak, bytes, bounds), above its answer line
    answer: str  # the study's answer, without "answer: ": the ceiling, the bound, one next step (<= ANSWER_ROOM)
    short: str  # the same in a few words, for a line that already gives the figures (scale out or up)
    evidence: tuple[str, ...] = field(default_factory=tuple)  # one line per config, for the report
    others_percent: float | None = None  # others' largest share of a full host; None: others did not take it


def advice(transports: Sequence[str], server_local: bool, unit: str = "GPU") -> str:
    """What to measure next to lift the cap off the GPUs, by how the load reached the server."""
    shm = "cuda_shm" if unit == "GPU" else "system_shm"
    if all(transport_spec(t).local_only for t in transports):
        more = " or the inputs in GPU memory (load.transport = cuda_shm)" if unit == "GPU" and "cuda_shm" not in transports else ""
        return f"send more items per request (load.batch_size){more}"
    if server_local:
        return f"measure over shared memory on this box (load.transport = {shm}), or with load from more hosts (--hosts N)"
    return ("measure with load from more hosts (--hosts N), or on the GPU box itself over shared memory "
            "(load.transport = auto)")


def next_step(transports: Sequence[str], server_local: bool, unit: str = "GPU") -> str:
    """advice()'s first step in a few words, for the answer line (the line above gives them all)."""
    if all(transport_spec(t).local_only for t in transports):
        return "next: a larger load.batch_size"
    if server_local:
        return f"next: try load.transport = {'cuda_shm' if unit == 'GPU' else 'system_shm'}"
    return "next: more load hosts (--hosts N)"


def _size(request_bytes: int) -> str:
    return f"{fmt.body_size(request_bytes)} requests" if request_bytes > 0 else "requests of a size not measured"


def request_path_cap(configs: Sequence[PeakEvidence], unit: str = "GPU", server_local: bool = True,
                     items: str = "images", tolerance: float = TOLERANCE) -> RequestPathCap | None:
    """The cap, or None when the study's ordinary answer stands. ``unit``: what the configs add
    ("GPU", "CPU instance"); ``server_local``: the server ran on the measuring host."""
    if len(configs) < 2 or any(c.peak is None or c.peak <= 0 for c in configs):
        return None
    smallest = min(c.units for c in configs)
    if max(c.units for c in configs) <= smallest:
        return None  # no config adds a unit: nothing says more of them gave nothing
    peaks = tuple((c.variant, c.peak) for c in configs if c.peak is not None)
    ceiling = max(p for _, p in peaks)
    if min(p for _, p in peaks) < (1 - tolerance) * ceiling:
        return None  # some config does more than another: the ordinary answer weighs it
    larger = [c for c in configs if c.units > smallest]
    if any(not c.bounds for c in larger):
        return None
    if any(c.gpu_busy_percent is not None and c.gpu_busy_percent >= GPU_BUSY_PCT for c in larger):
        return None  # busy GPUs: the GPUs, not only the path, are at their limit there
    transports = tuple(dict.fromkeys(c.transport for c in configs))
    sizes = [c.request_bytes for c in configs if c.request_bytes > 0]
    request_bytes = max(sizes) if sizes else 0
    bounds = tuple((b, tuple(c.variant for c in configs if b in c.bounds)) for b in BOUNDS
                   if any(b in c.bounds for c in configs))
    each = ", ".join(f"{variant} {fmt.rate(peak)}" for variant, peak in peaks)
    where = "; ".join(f"{b} at {', '.join(variants)}" for b, variants in bounds)
    over = " and ".join(transports)
    # a host whose CPUs other processes took: the remedy is a quieter box, not a faster path
    crowded = [c.host_others_percent for c in configs if HOST_CPU in c.bounds and c.host_others_percent is not None]
    todo = f"{CROWDED} (others {fmt.percent_points(max(crowded))} of the host)" if crowded else \
        advice(transports, server_local, unit)
    line = (f"not a {unit} question here: every config tops out near {fmt.rate(ceiling)} {items}/s ({each}) over {over} "
            f"with {_size(request_bytes)} (the request path: {where}); {todo}")
    main = max(bounds, key=lambda b: len(b[1]))[0]  # seen at the most configs; ties in BOUNDS order
    if crowded:
        answer = (f"not a {unit} question: other processes took this host's CPU (others "
                  f"{fmt.percent_points(max(crowded))}), capping every config near {fmt.rate(ceiling)} {items}/s; "
                  "next: a quieter box")
    else:
        answer = (f"not a {unit} question: the request path ({main}) caps every config near {fmt.rate(ceiling)} "
                  f"{items}/s; {next_step(transports, server_local, unit)}")
    short = (f"not a {unit} question here: both top out near the request path's ceiling "
             f"({fmt.rate(ceiling)} {items}/s over {over})")
    return RequestPathCap(ceiling, peaks, transports, request_bytes, bounds, line, answer, short,
                          tuple(c.describe(items) for c in configs), max(crowded) if crowded else None)
