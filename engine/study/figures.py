"""A study's figures, read from its index and the variants' recordings: per config the peak, the
SLO point, efficiency, cost per 1000 images (peak and SLO), joules per image, saturation point
and bottleneck verdict; then the marginal gain of each added GPU and where to stop. A streaming
model's study counts output tokens instead: tokens/s, $ per million tokens and joules per token."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import format as fmt
from engine.analysis.answer import Answer, decide, first_fitting, level_words, output_rate
from engine.analysis.bottleneck import cpu_shares, evidence_from_result, host_full
from engine.analysis.energy import config_gpus, joules_per_image
from engine.analysis.host_cpu_share import OTHERS, who_takes
from engine.analysis.request_path_cap import PeakEvidence, RequestPathCap, request_path_cap
from engine.analysis.scale_out import (
    Figure,
    ScaleAnswer,
    Side,
    boxes_label,
    run_failed,
    scale_answer,
)
from engine.analysis.scaling import cost_per_1000, cost_per_million_tokens
from engine.analysis.scaling_forecast import Forecast, arm_lines
from engine.analysis.slo import Slo, SloPoint, parse_slo
from engine.analysis.study import ConfigPoint, Step, StopAt, efficiency, marginal_steps, stop_at
from engine.errors import UserError
from engine.profiles import scale_out_parts
from engine.record.findings import (
    RunFindings,
    analyze,
    host_cores,
    server_on_this_machine,
    stream_objectives,
)
from engine.record.level_windows import level_window_rates
from engine.record.reader import Recording
from engine.record.summary import RecordingSummary
from engine.study.forecasts import study_forecasts
from engine.study.index import StudyIndex, read_index, recording_paths
from engine.study.variants import is_gpu_variant, variant_order, variant_units

ENERGY_SOURCES = {"nvml": "NVML total-energy counter (nvmlDeviceGetTotalEnergyConsumption)",
                  "triton": "Triton's nv_energy_consumption (/metrics)"}


@dataclass
class ConfigFigures:
    variant: str
    units: int
    gpu: bool  # GPU config (units are GPUs) or CPU config (units are instances)
    findings: RunFindings
    slo: SloPoint | None
    cost_per_hour: float | None
    cost_basis: str
    cost_peak: float | None
    cost_slo: float | None
    j_per_image_peak: float | None
    j_per_image_slo: float | None
    energy_source: str | None
    efficiency_peak: float | None = None
    efficiency_slo: float | None = None
    search_levels: list[float] = field(default_factory=list)
    answer: Answer | None = None  # the config's sound levels, by the rule every surface uses
    # a streaming model's config: output tokens/s, $ per million tokens and J per token at the
    # peak and at the SLO point (load.slo's objectives, or the study's latency target)
    streaming: bool = False
    tokens_peak: float | None = None
    tokens_slo: float | None = None
    cost_mtok_peak: float | None = None
    cost_mtok_slo: float | None = None
    j_per_token_peak: float | None = None
    j_per_token_slo: float | None = None
    peak_windows: list[float] = field(default_factory=list)  # its peak level's merged windows' rates
    slo_windows: list[float] = field(default_factory=list)  # its SLO point's merged windows' rates
    # "1x*2 failed (why)": its run failed, lost a server or was refused, so it decides nothing
    # (no efficiency, no cost, no deciding figure); None: it ran to its end
    failed: str | None = None

    @property
    def not_decided(self) -> str:
        """Why no sound level gives this config's deciding figure ("" when one does)."""
        return self.answer.not_decided if self.answer is not None else ""

    @property
    def summary(self) -> RecordingSummary:
        return self.findings.summary

    @property
    def peak_throughput(self) -> float | None:
        """images/s at the peak; a streaming config's output tokens/s."""
        if self.streaming:
            return self.tokens_peak
        return self.findings.peak.throughput if self.findings.peak else None

    @property
    def deciding_throughput(self) -> float | None:
        """What the config served at its deciding point (the SLO point with a target, else the
        peak), in its own items (images/s, or a streaming model's tokens/s); None for a config
        that failed."""
        if self.failed:
            return None
        if self.answer is not None and self.answer.targeted:
            if self.streaming:
                return self.tokens_slo
            return self.slo.throughput if self.slo is not None else None
        return self.peak_throughput

    @property
    def deciding_cost(self) -> float | None:
        """$ per 1000 images (a streaming model: $ per million tokens) at the deciding point."""
        if self.failed:
            return None
        targeted = self.answer is not None and self.answer.targeted
        if self.streaming:
            return self.cost_mtok_slo if targeted else self.cost_mtok_peak
        return self.cost_slo if targeted else self.cost_peak

    @property
    def shared_gpus(self) -> int | None:
        """A scale-out of more one-GPU servers than the box has GPUs (the mechanics on a small
        box): the GPUs they shared; None otherwise. Its per-GPU efficiency means nothing."""
        parts = self.scale_out
        box = self.summary.gpu_count
        return box if parts and parts[0] in ONE_GPU and 0 < box < parts[1] else None

    @property
    def scale_out(self) -> tuple[str, int] | None:
        """("1x", 4) for "1x*4": the config of each server and how many; None for one server."""
        return scale_out_parts(self.variant)


@dataclass
class ScaleComparison:
    """A scale-out config against the scale-up config of the same size, with the answer."""

    variant: str  # the scale-out config ("1x*2")
    out: ConfigFigures | None  # None: it left no recording (refused before any load)
    up: ConfigFigures | None  # None: the study has no scale-up config of that size, or it left no recording
    answer: ScaleAnswer


@dataclass
class StudyFigures:
    index: StudyIndex
    index_path: Path
    slo: Slo | None
    configs: list[ConfigFigures]
    steps: list[Step]
    stop: StopAt
    basis: str  # "at p99 <= 50 ms" or "peak"
    unit: str  # "GPU" or "CPU instance"
    recordings: list[Recording]
    scale: list[ScaleComparison] = field(default_factory=list)  # one per scale-out config
    streaming: bool = False  # a streaming model: figures in output tokens
    forecasts: list[Forecast] = field(default_factory=list)  # larger configs predicted from smaller ones
    # variant -> "2x failed (why)", in study order: each config whose run failed, lost a server or
    # was refused (with or without a recording); the study's answer is then not decided
    failed: dict[str, str] = field(default_factory=dict)
    # the request path caps every config (engine/analysis/request_path_cap.py): the answer is
    # that, not a size; None: the ordinary answer stands
    request_cap: RequestPathCap | None = None


def _energy_series(recording: Recording) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """source -> GPU key ("idx:uuid") -> [(ts, joules)]"""
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for _seq, ts, _kind, data in recording.rows(kinds=("gpu_sample",)):
        for g in data.get("gpus") or []:
            if g.get("energy_j") is None:
                continue
            key = f"{g.get('index')}:{g.get('uuid')}"
            out.setdefault(data.get("source") or g.get("source") or "", {}).setdefault(key, []).append(
                (float(ts), float(g["energy_j"])))
    return out


def _measured_spans(recording: Recording) -> dict[int, tuple[float, float, float, float]]:
    """level index -> (start, end, images, output tokens) of the windows merged into its result
    (tokens: a streaming level's, each window's tokens/s over its span; 0 for a unary level)."""
    windows: dict[int, list[dict[str, Any]]] = {}
    spans: dict[int, tuple[float, float, float, float]] = {}
    current = -1
    for _seq, _ts, kind, data in recording.rows(kinds=("level_started", "window", "level_result")):
        if kind == "level_started":
            current = int(data["index"])
        elif kind == "window" and not data.get("warmup"):
            windows.setdefault(current, []).append(data)
        elif kind == "level_result":
            index = int(data["index"])
            measured = windows.get(index, [])
            merged = measured if data.get("status") == "failed" else measured[-int(data.get("merged_windows") or 0):]
            if merged and data.get("merged_windows"):
                images = sum(int(w["requests"]) for w in merged) * int(data.get("batch_size") or 1)
                tokens = sum(float((w.get("stream") or {}).get("output_tokens_per_s") or 0.0)
                             * (float(w["t_end"]) - float(w["t_start"])) for w in merged)
                spans[index] = (min(w["t_start"] for w in merged), max(w["t_end"] for w in merged), images, tokens)
    return spans


def _energy(recording: Recording, summary: RecordingSummary) -> tuple[dict[float, float], dict[float, float], str | None]:
    """level -> J/image and level -> J/output token (a streaming level) over its merged windows,
    and the counter they came from (None: no GPU energy counter, as on a CPU run)."""
    series = _energy_series(recording)
    source = "nvml" if series.get("nvml") else ("triton" if series.get("triton") else None)
    if source is None:
        return {}, {}, None
    variant = summary.config_variant or ""
    parts = scale_out_parts(variant)
    # a scale-out's servers are pinned to GPUs 0..N-1 (engine/server/fleet.py), one each; a served
    # tpN server to the first N (engine/server/serve_command.py), with no Triton config to name them
    wanted = (set(range(parts[1])) if parts and parts[0] in ONE_GPU else
              set(range(variant_units(variant))) if re.fullmatch(r"tp[1-9]\d*", variant) else
              config_gpus(summary.server.get("model_config") or summary.model_config or {}))
    devices = {k: v for k, v in series[source].items()
               if wanted is None or k.split(":", 1)[0] == "None" or int(k.split(":", 1)[0]) in wanted}
    out: dict[float, float] = {}
    per_token: dict[float, float] = {}
    spans = _measured_spans(recording)
    for lv in summary.levels:
        span = spans.get(lv.result.index)
        if span is None:
            continue
        value = joules_per_image(devices, span[0], span[1], span[2])
        if value is not None:
            out[float(lv.result.level)] = value
        token = joules_per_image(devices, span[0], span[1], span[3]) if span[3] > 0 else None
        if token is not None:
            per_token[float(lv.result.level)] = token
    return out, per_token, source


ONE_GPU = ("1x", "tp1")  # the server a scale-out config repeats on each one-GPU box (Triton's, a served LLM's)
SCALE_OUT_PRICE_HINT = "set --cost 1=DOLLARS (a one-GPU box's $/hr) or --scale-out-profile NAME (a one-GPU profile)"
SCALE_UP_PRICE_HINT = "set hardware.cost_per_hour in the profile or --cost GPUS=DOLLARS"


def _scale_out_cost(summary: RecordingSummary, variant: str, costs: dict[int, float],
                    one_box: tuple[float, str] | None) -> tuple[float | None, str]:
    """N servers are N boxes: N times a one-GPU box's price (--cost 1=, else the one-GPU profile
    given with --scale-out-profile); on a CPU study N times the box's own price."""
    parts = scale_out_parts(variant)
    assert parts is not None
    base, n = parts
    if base in ONE_GPU and 1 in costs:
        return n * costs[1], f"{n} one-GPU boxes at ${costs[1]:g}/hr each (given on the command line)"
    if one_box is not None:
        return n * one_box[0], f"{n} boxes at ${one_box[0]:g}/hr each ({one_box[1]})"
    if base not in ONE_GPU and summary.cost_per_hour is not None:
        return n * summary.cost_per_hour, f"{n} boxes like this one at ${summary.cost_per_hour:g}/hr each"
    return None, f"not set: {SCALE_OUT_PRICE_HINT}"


def _cost(summary: RecordingSummary, variant: str, costs: dict[int, float],
          one_box: tuple[float, str] | None = None) -> tuple[float | None, str]:
    if scale_out_parts(variant):
        return _scale_out_cost(summary, variant, costs, one_box)
    units = variant_units(variant)
    gpu = is_gpu_variant(variant)
    if gpu and units in costs:
        return costs[units], f"${costs[units]:g}/hr for a {units}-GPU box (given on the command line)"
    box = summary.cost_per_hour
    if box is None:
        return None, "not set (hardware.cost_per_hour or --cost)"
    if gpu and summary.gpu_count and units < summary.gpu_count:
        share = box * units / summary.gpu_count
        return share, (f"${share:g}/hr: {units} of the box's {summary.gpu_count} GPUs at ${box:g}/hr "
                       "(pro rata, as a box of that size would cost)")
    return box, f"${box:g}/hr (the box)"


def study_figures(index_path: Path, costs: dict[int, float] | None = None) -> StudyFigures:
    index = read_index(index_path)
    costs = dict(costs or {})
    for key, value in index.costs.items():
        costs.setdefault(int(key), float(value))
    one_box = ((index.scale_out_price, index.scale_out_price_from or "the one-GPU profile")
               if index.scale_out_price else None)
    slo = parse_slo(index.slo) if index.slo else None
    recordings = []
    configs = []
    done = set(index.finished)
    failed = {r.variant: why for r in sorted(index.runs, key=lambda r: variant_order(r.variant))
              if (why := run_failed(r.variant, r.status, r.exit_code, r.error))}
    for variant, path in recording_paths(index, index_path):
        if variant not in done:
            continue
        recording = Recording.open(path)
        recordings.append(recording)
        summary = recording.summary()
        findings = analyze(summary)
        per_hour, basis = _cost(summary, variant, costs, one_box)
        answer = decide([lv.result for lv in findings.levels], slo, per_hour, summary.gpus_in_config or 0,
                        stream_slos=() if slo is not None else stream_objectives(summary.stream_slo))
        point = None
        if slo is not None:
            at = answer.slo_level
            point = SloPoint(float(at.level) if at else None, at.throughput_ips if at else None,
                             getattr(at.latency, slo.percentile) if at else None, answer.slo_bounded)
        energy, energy_tokens, source = _energy(recording, summary)
        peak = findings.peak
        best, at_slo = answer.best, answer.slo_level if answer.targeted else None
        tokens_peak = best.stream.output_tokens_per_s if best is not None and best.stream is not None else None
        tokens_slo = at_slo.stream.output_tokens_per_s if at_slo is not None and at_slo.stream is not None else None
        per_hour_figures = None if variant in failed else per_hour  # no cost per image from a failed run
        configs.append(ConfigFigures(
            variant=variant, units=variant_units(variant), gpu=is_gpu_variant(variant), findings=findings, slo=point,
            cost_per_hour=per_hour, cost_basis=basis,
            cost_peak=cost_per_1000(per_hour_figures, peak.throughput) if per_hour_figures and peak else None,
            cost_slo=(cost_per_1000(per_hour_figures, point.throughput)
                      if per_hour_figures and point and point.throughput else None),
            j_per_image_peak=energy.get(peak.level) if peak else None,
            j_per_image_slo=energy.get(point.level) if point and point.level is not None else None,
            energy_source=ENERGY_SOURCES.get(source) if source else None,
            search_levels=[float(lv.result.level) for lv in summary.levels if lv.result.slo_search],
            answer=answer,
            streaming=answer.streaming,
            tokens_peak=tokens_peak, tokens_slo=tokens_slo,
            cost_mtok_peak=cost_per_million_tokens(per_hour_figures, tokens_peak)
            if per_hour_figures and tokens_peak else None,
            cost_mtok_slo=cost_per_million_tokens(per_hour_figures, tokens_slo) if per_hour_figures and tokens_slo else None,
            j_per_token_peak=energy_tokens.get(float(best.level)) if best is not None else None,
            j_per_token_slo=energy_tokens.get(float(at_slo.level)) if at_slo is not None else None,
            peak_windows=level_window_rates(recording, best),
            slo_windows=level_window_rates(recording, at_slo),
            failed=failed.get(variant),
        ))
    configs.sort(key=lambda c: variant_order(c.variant))
    if not configs:
        raise UserError(f"{index_path}: no variant of this study finished (missing: {', '.join(index.missing)})")
    base = configs[0]
    for c in configs:
        if c.shared_gpus or c.failed or base.failed:  # per-GPU figures against a failed run mean nothing
            continue
        c.efficiency_peak = efficiency(c.peak_throughput, c.units, base.peak_throughput, base.units)
        if c.streaming and c.tokens_slo is not None and base.tokens_slo is not None:
            c.efficiency_slo = efficiency(c.tokens_slo, c.units, base.tokens_slo, base.units)
        elif c.slo and base.slo:
            c.efficiency_slo = efficiency(c.slo.throughput, c.units, base.slo.throughput, base.units)
    gpu = all(c.gpu for c in configs)
    unit = "GPU" if gpu else "CPU instance"
    targets = {c.answer.target_words for c in configs if c.answer is not None and c.answer.targeted}
    target = f"{slo.percentile} <= {slo.target_s * 1000:g} ms" if slo else (next(iter(targets)) if targets else None)
    basis = f"at {target}" if target else "peak"
    streaming = any(c.streaming for c in configs)
    # the marginal gain and "stop at" weigh GPUs added to one server: the scale-out configs are
    # the other answer (scale_comparisons)
    points = [ConfigPoint(c.variant, c.units, c.deciding_throughput, c.deciding_cost, c.not_decided, c.failed)
              for c in configs if c.scale_out is None]
    measured = {c.variant for c in configs}
    points += [ConfigPoint(v, variant_units(v), None, failed=why) for v, why in failed.items()
               if v not in measured and scale_out_parts(v) is None]  # refused before any recording
    items, cost_label = ("tokens", "$/million tokens") if streaming else ("images", "$/1000 images")
    cap = None
    if len({c.gpu for c in configs}) == 1:  # GPUs and CPU instances are no one scale
        cap = request_path_cap([peak_evidence(c) for c in configs], unit,
                               server_local=all(server_on_this_machine(c.summary.server) for c in configs), items=items)
    stop = stop_at(points, unit, basis=basis, items=items, cost_label=cost_label)
    if cap is not None:
        stop = StopAt(None, None, cap.line)  # no size to stop at: the GPUs were never the limit
    return StudyFigures(index=index, index_path=Path(index_path), slo=slo, configs=configs,
                        steps=marginal_steps(points), stop=stop, basis=basis,
                        unit=unit, recordings=recordings, scale=scale_comparisons(configs, target, failed, cap),
                        streaming=streaming, forecasts=study_forecasts(index, configs), failed=failed,
                        request_cap=cap)


def peak_evidence(c: ConfigFigures) -> PeakEvidence:
    """What the config's recording says of the request path at its sound peak: the client audit
    there or above, the host's CPUs, the wire check, the bottleneck verdict, its GPUs' use, and
    the transport and bytes per request."""
    f = c.findings
    best = c.answer.best if c.answer is not None else None
    if best is None:
        return PeakEvidence(c.variant, c.units, None, transport=c.summary.transport)
    at = next((lv for lv in f.levels if lv.result is best), None) or \
        next((lv for lv in f.levels if float(lv.level) == float(best.level)), None)
    flagged = next((lv.result for lv in sorted(f.levels, key=lambda lv: lv.level)
                    if lv.level >= best.level and lv.result.audit.client_bound), None)
    e = evidence_from_result(at.result, at.gpu_util, at.host_cpu_percent, at.own_cpu_percent,
                             at.server_cpu_percent) if at is not None else None
    busy = None
    if at is not None and at.gpu_util and c.gpu:
        # the config's GPUs: the busiest ones, as many as it uses (the others idle by design)
        used = sorted(at.gpu_util.values(), reverse=True)[:max(c.units, 1)]
        busy = sum(used) / len(used)
    kind = f.verdict.kind
    wire = f.wire_assessment
    # a full host whose CPU other processes took (engine/analysis/host_cpu_share.py's rule)
    shares = cpu_shares(e, host_cores(c.summary)) if e is not None and host_full(e) else None
    crowded = shares is not None and who_takes(shares.server, shares.ours, shares.others) == OTHERS
    return PeakEvidence(
        variant=c.variant, units=c.units, peak=c.peak_throughput,
        client_bound=flagged is not None or kind == "client-bound",
        client_reasons=tuple(flagged.audit.reasons) if flagged is not None else (),
        loop_lag_p99=flagged.audit.loop_lag_p99 if flagged is not None else None,
        host_full=(e is not None and host_full(e)) or kind == "host-cpu",
        host_cpu_percent=e.host_cpu_percent if e is not None else None,
        near_wire=(wire is not None and wire.at_limit) or kind == "request-path",
        wire_peak=f.wire.peak_ips if f.wire is not None else None,
        outside_server=kind == "network",
        gpu_busy_percent=busy, transport=c.summary.transport,
        request_bytes=best.network.request_bytes if best.network is not None else 0, on_gpus=c.gpu,
        host_others_percent=shares.others if crowded and shares is not None else None,
    )


def _unstable_at(c: ConfigFigures, level: float | None) -> bool:
    return any(p.level == level and p.status != "stable" for p in c.findings.points)


def _side(c: ConfigFigures, label: str, hint: str) -> Side:
    peak = c.findings.peak
    best = c.answer.best if c.answer is not None else None
    slo = None
    slo_windows = tuple(c.slo_windows)
    if c.streaming:
        a = c.answer
        at = a.slo_level if a is not None else None
        if a is not None and a.targeted:
            slo = Figure(c.tokens_slo, c.cost_mtok_slo, at is not None and at.status != "stable", tokens=True,
                         windows=slo_windows)
        return Side(label, c.cost_per_hour, hint,
                    Figure(c.tokens_peak, c.cost_mtok_peak, best is not None and best.status != "stable", tokens=True,
                           windows=tuple(c.peak_windows)),
                    slo, c.failed)
    if c.slo is not None:
        slo = Figure(c.slo.throughput if c.slo.level is not None else None, c.cost_slo,
                     c.slo.level is not None and _unstable_at(c, c.slo.level), windows=slo_windows)
    # the windows are the rule's best level's: the same level as the findings' peak, or none
    same = peak is not None and best is not None and float(best.level) == float(peak.level)
    return Side(label, c.cost_per_hour, hint,
                Figure(c.peak_throughput, c.cost_peak, peak is not None and peak.status != "stable",
                       windows=tuple(c.peak_windows) if same else ()), slo, c.failed)


def _unrecorded_side(label: str, hint: str, why: str) -> Side:
    """A config refused before any recording: no figure, only why."""
    return Side(label, None, hint, Figure(None, None), failed=why)


def scale_comparisons(configs: list[ConfigFigures], slo_name: str | None,
                      failed: dict[str, str] | None = None, cap: RequestPathCap | None = None) -> list[ScaleComparison]:
    """Each scale-out config against the one-server config of the same size (1x*4 against 4x,
    cpu*2 against cpu2), and the answer in one line. ``failed``: variant -> why, for the configs
    whose run failed; one that left no recording still has its line (not decided). No choice
    where ``cap``, the request path, held every config."""
    failed = failed or {}
    model = configs[0].summary.gpu_model if configs else None
    measured = {c.variant: c for c in configs}
    outs = sorted({*(c.variant for c in configs if c.scale_out is not None),
                   *(v for v in failed if scale_out_parts(v) is not None)}, key=variant_order)
    out = []
    for variant in outs:
        parts = scale_out_parts(variant)
        assert parts is not None
        base, n = parts
        gpu, units = is_gpu_variant(variant), variant_units(variant)
        c = measured.get(variant)
        label = boxes_label(n, base, model)
        out_side = (_side(c, label, SCALE_OUT_PRICE_HINT) if c is not None
                    else _unrecorded_side(label, SCALE_OUT_PRICE_HINT, failed[variant]))
        up = next((u for u in configs if u.scale_out is None and u.gpu == gpu and u.units == units), None)
        size = next((v for v in failed if v not in measured and scale_out_parts(v) is None
                     and is_gpu_variant(v) == gpu and variant_units(v) == units), None)
        if up is not None:
            answer = scale_answer(out_side, _side(up, boxes_label(1, up.variant, model), SCALE_UP_PRICE_HINT), slo_name,
                                  capped=cap.short if cap is not None else "")
        elif size is not None:  # the scale-up config of that size was refused before any recording
            answer = scale_answer(out_side, _unrecorded_side(boxes_label(1, size, model), SCALE_UP_PRICE_HINT,
                                                             failed[size]), slo_name)
        elif out_side.failed:
            answer = ScaleAnswer(None, f"{out_side.label}: not decided: {out_side.failed}")
        else:
            size = (f"tp{units}" if base == "tp1" else f"{units}x") if gpu else f"cpu{units}"
            answer = ScaleAnswer(None, f"{out_side.label}: no scale-up config of the same size in this study "
                                       f"(add {size} to --variants)")
        out.append(ScaleComparison(variant, c, up, answer))
    return out


def recommendation(f: StudyFigures) -> str:
    """Where to stop adding GPUs, and why ("stop at ..." or "not decided: ..."). Where only a
    scale-out config failed, the one-server configs' own stop still holds, after the failure."""
    if not f.failed:
        return f.stop.reason
    failed = f"not decided: {'; '.join(f.failed.values())}"
    return f"{failed}; among the one-server configs alone: {f.stop.reason}" if f.stop.variant else failed


LINE_ROOM = 120  # what an answer line leaves for its reason


def undecided_configs(configs: Sequence[ConfigFigures]) -> str:
    """"cpu2, cpu*2 (no sound level)": the configs no sound level decides, by cause, for the
    answer line (each one's reasons stand above it, in the recommendation)."""
    causes: dict[str, list[str]] = {}
    for c in configs:
        if c.not_decided and c.answer is not None:
            causes.setdefault(c.answer.cause or "not decided", []).append(c.variant)
    return "; ".join(f"{', '.join(variants)} ({cause})" for cause, variants in causes.items())


def answer_line(f: StudyFigures) -> str:
    """The study's one line: "answer: at p99 <= 50 ms, stop at 2 GPUs: 4,100 images/s, $0.08
    per 1000, stable (1 level re-measured)", "answer: not a GPU question: ..." where the
    request path capped every config, or "answer: not decided: ...", as when a config failed
    (whichever way it would have gone, the other side must not win by it)."""
    if f.failed:
        failed = "; ".join(f.failed.values())
        if len(failed) > LINE_ROOM:  # each failure stands in full above, in the recommendation
            failed = f"{', '.join(f.failed)} failed"
        return first_fitting(f"answer: not decided: {failed}", f"answer: not decided: {_configs(len(f.failed))} failed")
    if f.request_cap is not None:
        return f"answer: {f.request_cap.answer}"  # the full line stands above it (the recommendation)
    stop = f.stop
    config = next((c for c in f.configs if c.variant == stop.variant), None)
    undecided = undecided_configs(f.configs)
    counted = _configs(sum(1 for c in f.configs if c.not_decided))  # when their names do not fit
    if stop.variant is None or config is None or config.answer is None:
        reason = undecided or stop.reason.removeprefix("not decided: ")
        return first_fitting(f"answer: not decided: {reason}", f"answer: not decided: {counted}, each one's reason above")
    a = config.answer
    at = a.deciding
    assert at is not None  # stop_at only names a config with a figure
    plural = "s" if stop.units != 1 else ""
    items = "tokens" if config.streaming else "images"
    parts = [f"{fmt.rate(output_rate(at))} {items}/s at {level_words(at.mode, at.level)}"]
    cost = config.deciding_cost
    if cost is not None:
        parts.append(f"{fmt.money(cost)} per million output tokens" if config.streaming else f"{fmt.money(cost)} per 1000")
    again = sum(c.answer.remeasured for c in f.configs if c.answer is not None)
    count = f"{again} level{'s' if again != 1 else ''} re-measured"
    head = f"answer: {f.basis}, stop at {stop.units} {f.unit}{plural} ({config.variant}): {', '.join(parts)}, stable"
    if not undecided:
        return first_fitting(f"{head} ({count})", head)
    return first_fitting(f"{head} ({count}; not decided: {undecided})", f"{head} ({count}; {counted} not decided)",
                         f"{head} ({counted} not decided)")


def _configs(n: int) -> str:
    return f"{n} config{'s' if n != 1 else ''}"


@dataclass(frozen=True)
class EndLines:
    """What a study ends with on every screen, live and replayed."""

    scale_answers: list[str]  # one line per scale-out config; [] when it ran none
    answer: str
    forecasts: list[str]  # []: a CPU study


def end_lines(index_path: Path) -> EndLines:
    """A study's end lines from one reading of its recordings. Never raises: a study that cannot
    be read says so in each line."""
    try:
        index = read_index(index_path)
    except (UserError, OSError) as exc:
        return EndLines([f"no scale-out answer: {exc}"], f"answer: not decided: {exc}", [f"no forecast: {exc}"])
    failed = [r.variant for r in index.runs if run_failed(r.variant, r.status, r.exit_code, r.error)]
    scaled = any(scale_out_parts(v) for v in [*index.finished, *failed])
    try:
        f = study_figures(index_path)
    except Exception as exc:  # noqa: BLE001 - a doctored recording: the end lines say so, the replay goes on
        why = str(exc) if isinstance(exc, (UserError, OSError)) else \
            f"the study's recordings could not be read ({type(exc).__name__}: {exc})"
        return EndLines([f"no scale-out answer: {why}"] if scaled else [], f"answer: not decided: {why}",
                        [f"no forecast: {why}"])
    return EndLines([c.answer.line for c in f.scale] if scaled else [], answer_line(f), arm_lines(f.forecasts))


def study_answer_line(index_path: Path) -> str:
    """``answer_line`` of a study's index; never raises."""
    return end_lines(index_path).answer


def scale_answer_lines(index_path: Path) -> list[str]:
    """The study's scale-out answers, one line each; [] when it ran no scale-out config."""
    return end_lines(index_path).scale_answers


def forecast_lines(index_path: Path) -> list[str]:
    """The study's forecasts, one line each, beside the measured figure where it ran."""
    return end_lines(index_path).forecasts
