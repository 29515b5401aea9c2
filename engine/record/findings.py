"""One recording's conclusions, shared by its Markdown and HTML reports and by compare: the
sweep's points, peak, saturation point, cost, bottleneck verdict and a recommendation."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from engine import format as fmt
from engine.analysis.answer import Answer, decide
from engine.analysis.bottleneck import Verdict, diagnose, evidence_from_result
from engine.analysis.gpu_sharing import sharing_advice, taking_turns
from engine.analysis.host_cpu_share import host_cpu_words
from engine.analysis.saturation import UNSTABLE_MARK, Saturation, saturation_point
from engine.analysis.scaling import cost_per_1000, cost_per_million_tokens
from engine.analysis.stability import none_stable
from engine.analysis.stream_slo import Slo as StreamSlo
from engine.analysis.stream_slo import parse_slos
from engine.analysis.sweep_summary import SweepPoint, point_at, points_from_results
from engine.analysis.wire import Assessment, assess
from engine.events import WireCeiling
from engine.record.summary import LevelSummary, RecordingSummary

RANDOM_WEIGHTS_NOTE = (
    "Measured with random weights: throughput and latency do not depend on weight values "
    "(the same model with trained weights runs the same operations on the same shapes)."
)

ADVICE = {
    # the fallback only: a host-cpu verdict carries its own advice, by who took the CPU
    "host-cpu": host_cpu_words(None, None, None).advice,
    "client-bound": "Give the load generator more room (more workers, a bigger client machine, or run it on "
                    "another host): until then these figures understate the server.",
    "request-path": "Move the inputs off the HTTP body (load.transport = system_shm or cuda_shm with the client "
                    "beside the server), send more items per request (load.batch_size), or spread the clients: "
                    "the model's instances have room that the request path cannot feed.",
    "network": "Run the client next to the server (same host or network), or cut the payload "
               "(smaller inputs, binary/shared-memory transfers): the wire, not the GPUs, sets the pace.",
    "queueing": "Add model instances (instance_group count) or tune dynamic batching "
                "(preferred sizes, max queue delay): the GPUs have room while requests wait.",
    "compute": "The GPUs are the limit: more or faster GPUs raise throughput; compare cost per 1000 images "
               "across boxes before buying either.",
    "gpus-not-saturated": "Look at the server's CPU side (Python backend, pre/post-processing, PCIe copies): "
                          "the GPUs idle while throughput is flat. Work the server does per request (a Python "
                          "backend hands each request to its model process) is shared by more items when each "
                          "request carries several (load.batch_size).",
    "not-saturated": "Extend load.concurrency (or rates) until throughput stops rising before sizing a box.",
    "unknown": "Enable Triton's statistics (server side) to split queue from compute time.",
}

# "network" where the client already runs beside the server: on loopback the time outside Triton's
# statistics is its HTTP front end reading the bodies (measured on 4x H200: 602 KB images, the
# connections on a few of its 64 threads), so "run the client next to the server" would be wrong
LOCAL_NETWORK_ADVICE = ("The client already runs beside the server, so the time outside Triton's statistics is its "
                        "HTTP front end reading the request bodies, not a wire: move the inputs off the body "
                        "(load.transport = system_shm or cuda_shm), send more items per request (load.batch_size), "
                        "or give Triton more HTTP threads (--http-thread-count).")

CPU_COMPUTE_ADVICE = ("Model execution on the CPU is the limit (no GPU in this run): a GPU variant of the model "
                      "config, or more and faster CPU cores, raise throughput; compare cost per 1000 images across "
                      "boxes before buying either.")


@dataclass
class RunFindings:
    summary: RecordingSummary
    points: list[SweepPoint]
    peak: SweepPoint | None
    saturation: Saturation | None
    verdict: Verdict
    cost_per_1000_at_peak: float | None
    per_gpu_throughput: float | None
    recommendation: list[str] = field(default_factory=list)
    sweep: int | None = None  # which of the session's sweeps these figures come from
    levels: list[LevelSummary] = field(default_factory=list)  # that sweep's levels
    wire: WireCeiling | None = None  # the wire check after that sweep (run --wire)
    wire_assessment: Assessment | None = None  # the wire against that sweep
    answer: Answer | None = None  # the headline figures' rule (engine/analysis/answer.py)

    @property
    def streaming(self) -> bool:
        """A streaming model's sweep: priced per million output tokens, never per 1000 images."""
        return self.answer is not None and self.answer.streaming

    @property
    def peak_tokens_per_s(self) -> float | None:
        best = self.answer.best if self.answer is not None else None
        return best.stream.output_tokens_per_s if best is not None and best.stream is not None else None

    @property
    def cost_per_million_tokens_at_peak(self) -> float | None:
        rate = self.peak_tokens_per_s
        return cost_per_million_tokens(self.summary.cost_per_hour or 0.0, rate) if rate is not None else None

    @property
    def sweep_note(self) -> str:
        """"" for a one-sweep session; else which sweep the figures are from, to be said beside them."""
        s = self.summary
        run = s.sweep_run(self.sweep)
        if len(s.sweeps) < 2 or run is None:
            return ""
        return run.describe(len(s.sweeps))

    @property
    def label(self) -> str:
        return self.summary.label

    @property
    def stability_caveat(self) -> str:
        """"" when some level was stable; else one line that says none was, for the top of a report."""
        line = none_stable([lv.result.status for lv in self.levels])
        if not line:
            return ""
        return (f"{line[0].upper()}{line[1:]}. At every level the measurement windows disagreed beyond "
                "load.stability_percent: every figure below is from an unstable level (more windows: "
                "load.max_windows, or longer ones: load.window_ms, may settle them).")


def unstable_mark(point: SweepPoint | None, inside: bool = False) -> str:
    """" (an unstable level: ...)" after a figure drawn from a level that was not stable;
    ``inside``: the figure already sits in parentheses, so "; an unstable level: ..."."""
    if point is None or point.status == "stable":
        return ""
    return f"; {UNSTABLE_MARK}" if inside else f" ({UNSTABLE_MARK})"


def stream_objectives(text: str) -> tuple[StreamSlo, ...]:
    """load.slo as recorded; () where a doctored recording holds a bad one (the profile refused it)."""
    try:
        return parse_slos(text)
    except ValueError:
        return ()


def analyze(summary: RecordingSummary, sweep: int | None = None) -> RunFindings:
    """The findings of one sweep (``sweep``, default the summary's main sweep): levels of two
    sweeps never share a curve, a peak or a saturation point."""
    sweep = summary.main_sweep if sweep is None else sweep
    levels = summary.levels_of(sweep)
    results = [lv.result for lv in levels]
    points = points_from_results(results)
    answer = decide(results, cost_per_hour=summary.cost_per_hour, gpus=summary.gpus_in_config or 0,
                    stream_slos=stream_objectives(summary.stream_slo))
    best = point_at(points, float(answer.best.level)) if answer.best is not None else None
    # a client-bound level measured the load generator, not the server, and a level that is not
    # sound measured the box's noise: neither is ever a saturation point
    sound = {float(r.level) for r in answer.sound}
    client_bound = {float(r.level) for r in results if r.audit.client_bound}
    saturation = saturation_point([(p.level, p.throughput) for p in points
                                   if p.level not in client_bound and p.level in sound],
                                  left_out=sorted(client_bound))
    usable = {p.level for p in points}
    evidence = [replace(evidence_from_result(lv.result, lv.gpu_util, lv.host_cpu_percent, lv.own_cpu_percent,
                                             lv.server_cpu_percent), sound=float(lv.level) in sound)
                for lv in levels if float(lv.level) in usable]
    wire = summary.wires.get(sweep) if sweep is not None else None
    assessment = assess(wire, results, summary.model_config, summary.gpus_in_config) if wire else None
    verdict = diagnose(evidence, saturation, summary.gpus_in_config, wire,
                       assessment, server_local=server_on_this_machine(summary.server),
                       host_cores=host_cores(summary))
    cost = (cost_per_1000(summary.cost_per_hour, best.throughput) if best and summary.cost_per_hour
            and not answer.streaming else None)
    n = summary.gpus_in_config
    findings = RunFindings(
        summary=summary, points=points, peak=best, saturation=saturation, verdict=verdict,
        cost_per_1000_at_peak=cost,
        per_gpu_throughput=best.throughput / n if best and n else None,
        sweep=sweep, levels=levels, wire=wire, wire_assessment=assessment, answer=answer,
    )
    findings.recommendation = recommend(findings)
    return findings


def host_cores(summary: RecordingSummary) -> int | None:
    """The measuring host's CPU count as recorded; None where it is missing or not a count."""
    cores = summary.host.get("cpu_cores")
    return cores if isinstance(cores, int) and not isinstance(cores, bool) else None


def server_on_this_machine(server: dict[str, Any]) -> bool:
    """The embedded server, or a URL on a loopback address."""
    if server.get("embedded"):
        return True
    host = urlsplit(str(server.get("http_url") or "")).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def recommend(f: RunFindings) -> list[str]:
    s = f.summary
    out: list[str] = []
    if f.peak is None:
        if f.answer is not None and f.answer.not_decided and f.answer.left_out:
            return [f"Measure again before sizing: not decided: {f.answer.not_decided}."]
        return ["No level produced a result: fix the errors listed above and run again."]
    if f.stability_caveat:
        out.append("Measure again before sizing on these figures: no level was stable (see the top of this report).")
    sat = f.saturation
    if sat is not None and sat.reached and sat.level is not None:
        at = point_at(f.points, sat.level)
        top = f.points[-1]
        out.append(
            f"Serve at up to concurrency {fmt.level_value(sat.level)}: {fmt.rate(at.throughput if at else None)} images/s "
            f"with p99 {fmt.ms(at.p99 if at else None)} ms{unstable_mark(at)}; more load adds under {sat.tolerance * 100:g} % "
            f"throughput while p99 reaches {fmt.ms(top.p99)} ms at {fmt.level_value(top.level)}."
        )
    if f.verdict.kind == "compute" and not s.gpus_in_config:
        out.append(CPU_COMPUTE_ADVICE)  # no GPU in this run: "the GPUs are the limit" would be false
    elif f.verdict.kind == "network" and server_on_this_machine(s.server):
        out.append(LOCAL_NETWORK_ADVICE)
    else:
        out.append(f.verdict.advice or ADVICE.get(f.verdict.kind, ""))
    for finding in f.verdict.findings:
        if finding.kind == "gpu-imbalance":
            out.append("Spread the model over every GPU (instance_group with a count per GPU, no fixed gpus list).")
        elif finding.kind == "host-cpu":
            out.append(finding.advice or host_cpu_words(None, None, None).finding_advice)
    if s.mps is not True:  # the embedded server under MPS: NVML may list its stubs, and they share the GPU
        out.append(sharing_advice(taking_turns(s.gpu_sharing), bool(s.server.get("embedded"))) or "")
    if f.streaming:
        per_mtok = f.cost_per_million_tokens_at_peak
        out.append(f"At its peak this box costs {fmt.money(per_mtok)} per million output tokens (${s.cost_per_hour:g}/hr, "
                   f"{fmt.rate(f.peak_tokens_per_s)} tokens/s{unstable_mark(f.peak, inside=True)})." if per_mtok is not None
                   else "Set hardware.cost_per_hour in the profile to get the cost per million output tokens.")
    elif f.cost_per_1000_at_peak is not None:
        out.append(
            f"At its peak this box costs {fmt.money(f.cost_per_1000_at_peak)} per 1000 images "
            f"(${s.cost_per_hour:g}/hr, {fmt.rate(f.peak.throughput)} images/s{unstable_mark(f.peak, inside=True)})."
        )
    else:
        out.append("Set hardware.cost_per_hour in the profile to get the cost per 1000 images.")
    if s.gpus_in_config and s.gpus_in_config > 1:
        out.append(
            "For scaling efficiency, record the 1x variant of the same model and config on this box "
            "and compare the two recordings."
        )
    return [line for line in out if line]
