"""Recordings side by side (1x vs 2x vs 4x, RTX 4080 vs A100): throughput, latency, scaling
efficiency against the 1x run, cost per 1000 images, saturation point and bottleneck verdict,
after checking that the runs are apples-to-apples (seed 000) and saying precisely where not.

Scaling efficiency: each run's peak against the peak of the 1x run (config variant "1x") of the
same GPU model and model; N = the GPU count of the run's config variant.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from engine import format as num
from engine.analysis.gates import gate_exit_code, gate_word
from engine.analysis.scale_out import Figure, Side, boxes_label, run_failed, scale_answer
from engine.analysis.scaling import cost_per_million_tokens
from engine.analysis.sweep_summary import ScalingFigures, point_at, scaling_vs_base
from engine.errors import UserError
from engine.events import LevelResult
from engine.profiles import scale_out_parts
from engine.record import svg
from engine.record.doc import (
    Bullets,
    Chart,
    Doc,
    Heading,
    Note,
    Para,
    Table,
    to_html,
    to_markdown,
    to_text,
)
from engine.record.findings import RANDOM_WEIGHTS_NOTE, RunFindings, analyze, unstable_mark
from engine.record.level_windows import level_window_rates
from engine.record.naming import gpu_slug
from engine.record.reader import Recording
from engine.record.summary import RecordingSummary
from engine.record.tell_apart import config_leaves, unique_names

SCALES_WELL = 0.75  # below this, seed 001's "single GPU + horizontal scale" branch
NEAR_LINEAR = 0.90
SUPERLINEAR = 1.10  # more than N x the 1x run: usually not the same work
# Model-config keys that legitimately differ between the 1x/2x/4x variants of one model.
VARIANT_KEYS = frozenset({"instance_group", "name"})
MEASUREMENT_KEYS = ("window_ms", "min_window_requests", "stability_percent", "stable_windows", "max_windows",
                    "warmup_s", "data", "arrival", "burstiness",
                    # the workload: configs compare only on the same traffic
                    "input_tokens", "output_tokens", "prefix_groups", "prefix_tokens", "distinct_prompts", "turns", "think_time_s",
                    "cache_reset", "block_tokens")
VERSION_KEYS = ("triton", "driver", "cuda", "torch", "gpuscale_tui")
# read on the measuring machine: the server's own only when we started it (embedded)
CLIENT_SIDE_VERSIONS = ("torch", "driver", "cuda")


@dataclass
class RunComparison:
    findings: RunFindings
    label: str
    n: int | None  # GPUs in the config variant
    base_label: str | None  # the 1x run this one scales from
    scaling: ScalingFigures | None
    peak_windows: tuple[float, ...] = ()  # the rates of the windows merged into its deciding level

    @property
    def summary(self) -> RecordingSummary:
        return self.findings.summary


@dataclass
class Comparison:
    runs: list[RunComparison]
    mismatches: list[str] = field(default_factory=list)  # break apples-to-apples
    notes: list[str] = field(default_factory=list)  # differences to keep in mind
    levels: list[float] = field(default_factory=list)  # every level any run measured
    study_verdict: str | None = None  # a study's own conclusion (stop at N), when these runs are one study
    scale_answers: list[str] = field(default_factory=list)  # scale out or scale up, per scale-out run
    gates: list[str] = field(default_factory=list)  # the gates checked, in words ([]: none)
    gate_failures: list[str] = field(default_factory=list)

    @property
    def lowest_efficiency(self) -> float | None:
        """For a min_efficiency gate: the worst multi-GPU run against its 1x base."""
        values = [r.scaling.efficiency for r in self.runs
                  if r.n and r.n > 1 and r.scaling is not None and r.scaling.efficiency is not None]
        return min(values) if values else None


def compare(recordings: list[Recording], costs: dict[int, float] | None = None, pro_rata: bool = False,
            study_verdict: str | None = None, scale_out_price: tuple[float, str] | None = None) -> Comparison:
    """``costs``: $/hr by GPU count of the config variant (seed 001's "1gpu:1.5,2gpu:3.0"), for runs
    made on one big box that stand for smaller boxes; it replaces each profile's cost_per_hour.
    ``pro_rata``: a run on part of the box, not priced by ``costs``, costs its share of the box
    (what the study's own table does, so that its report and this comparison agree).
    ``study_verdict``: the runs are one scaling study, whose verdict this is: the model-config
    differences between its variants are its variable, not a mismatch, and the recommendation
    leads with its verdict. ``scale_out_price``: a one-GPU box's $/hr and where it is from, for
    the scale-out runs (N servers are N boxes); ``costs[1]`` wins over it."""
    if len(recordings) < 2:
        raise UserError(f"compare needs two or more recordings, got {len(recordings)}")
    summaries = [r.summary() for r in recordings]
    _refuse_streaming_with_unary(summaries)
    if costs and not any(s.gpus_in_config for s in summaries):
        given = " ".join(f"--cost {k}={v:g}" for k, v in costs.items())
        raise UserError(f"{given}: prices a box by its GPUs, and these runs ran on the CPU: set "
                        "hardware.cost_per_hour in each run's profile for its box's price")
    priced: dict[int, str] = {}  # run index -> how its price was set
    for i, summary in enumerate(summaries):
        n, box, count = summary.gpus_in_config, summary.cost_per_hour, summary.gpu_count
        if (parts := scale_out_parts(summary.config_variant)) is not None:
            price, priced_how = scale_out_box_price(parts, costs or {}, scale_out_price, box)
            summaries[i] = replace(summary, cost_per_hour=price)
            if priced_how:
                priced[i] = priced_how
        elif costs and n in costs:
            summaries[i] = replace(summary, cost_per_hour=costs[n])
            priced[i] = "given on the command line"
        elif pro_rata and n and count and n < count and box:
            summaries[i] = replace(summary, cost_per_hour=box * n / count)
            priced[i] = f"{n} of the box's {count} GPUs at ${box:g}/hr, pro rata, as the study prices it"
    findings = [analyze(s) for s in summaries]
    labels = _unique_labels([f.label for f in findings], summaries)
    runs = [RunComparison(f, label, f.summary.gpus_in_config, None, None, tuple(level_window_rates(rec, _best(f))))
            for f, label, rec in zip(findings, labels, recordings, strict=True)]
    for run in runs:
        base = _base_for(run, runs)
        if base is not None and run.n:
            run.base_label = base.label
            run.scaling = scaling_vs_base(run.findings.points, base.findings.points, run.n)
    runs.sort(key=lambda r: (gpu_slug(r.summary.gpu_model, r.summary.gpu_count), r.n or 0, r.label))
    comparison = Comparison(runs=runs, levels=sorted({p.level for r in runs for p in r.findings.points}),
                            study_verdict=study_verdict)
    _check_apples_to_apples(comparison, {findings[i].label: how for i, how in priced.items()}, study=study_verdict is not None)
    comparison.scale_answers = _scale_answers(runs)
    return comparison


def _refuse_streaming_with_unary(summaries: list[RecordingSummary]) -> None:
    """A streaming run's latency is to its final response of many, a unary run's to its one
    answer: side by side they would read as one figure. One line, exit 2."""
    from engine.transport_table import transport_spec

    streaming = sorted({s.transport for s in summaries if transport_spec(s.transport).streams})
    unary = sorted({s.transport for s in summaries if not transport_spec(s.transport).streams})
    if streaming and unary:
        raise UserError(f"compare: streaming runs ({', '.join(streaming)}) and unary runs ({', '.join(unary)}) "
                        "measure different things: compare each kind apart")


SCALE_OUT_UNPRICED = "no price for its one-GPU boxes: set --cost 1=DOLLARS or --scale-out-profile NAME"


def scale_out_box_price(parts: tuple[str, int], costs: Mapping[int, float], one_box: tuple[float, str] | None,
                        box: float | None) -> tuple[float | None, str]:
    """A scale-out run's $/hr: its N servers are N boxes, each priced as a one-GPU box (--cost 1=,
    else a one-GPU profile's price), or on a CPU run as the box it ran on; never the N-GPU box's
    price it may have been recorded with."""
    base, n = parts
    if base in ("1x", "tp1") and 1 in costs:
        return n * costs[1], f"{n} one-GPU boxes at ${costs[1]:g}/hr each (given on the command line)"
    if one_box is not None:
        return n * one_box[0], f"{n} boxes at ${one_box[0]:g}/hr each ({one_box[1]})"
    if base not in ("1x", "tp1") and box:
        return n * box, f"{n} boxes like this one at ${box:g}/hr each"
    return None, ""


def _scale_answers(runs: list[RunComparison]) -> list[str]:
    """Each scale-out run against a one-server run with as many GPUs, of the same GPU and model; a
    run that failed (a server lost, a level failed) leaves its answer not decided."""
    out = []
    for r in runs:
        parts = scale_out_parts(r.summary.config_variant)
        if parts is None:
            continue
        ups = [u for u in runs if scale_out_parts(u.summary.config_variant) is None and _size(u) == _size(r)
               and (u.summary.gpu_model, u.summary.model) == (r.summary.gpu_model, r.summary.model)]
        if not ups:
            continue
        up = ups[0]
        side_out = Side(boxes_label(parts[1], parts[0], r.summary.gpu_model), r.summary.cost_per_hour,
                        SCALE_OUT_UNPRICED.split(": ", 1)[1], _peak_figure(r), failed=_failed(r))
        side_up = Side(boxes_label(1, up.summary.config_variant or f"{up.n}x", up.summary.gpu_model),
                       up.summary.cost_per_hour, "set hardware.cost_per_hour or --cost GPUS=DOLLARS", _peak_figure(up),
                       failed=_failed(up))
        out.append(scale_answer(side_out, side_up).line)
    return out


def _failed(r: RunComparison) -> str | None:
    s = r.summary
    return run_failed(s.config_variant or r.label, s.status, s.exit_code, s.error)


def _size(r: RunComparison) -> tuple[str, int | None]:
    """("GPU", GPUs) or ("CPU", model instances): 1x*4 matches 4x, cpu*2 matches cpu2."""
    variant = r.summary.config_variant
    base, servers = scale_out_parts(variant) or (variant, 1)
    if base.startswith("cpu"):
        instances = base[3:]
        return "CPU", (int(instances) if instances.isdigit() else 1) * servers
    return "GPU", r.n


def _best(f: RunFindings) -> LevelResult | None:
    return f.answer.best if f.answer is not None else None


def _peak_figure(r: RunComparison) -> Figure:
    peak = r.findings.peak
    best = _best(r.findings)
    if best is not None and best.stream is not None:  # a streaming model's: tokens and $ per million of them
        tokens = best.stream.output_tokens_per_s
        return Figure(tokens, cost_per_million_tokens(r.summary.cost_per_hour or 0.0, tokens),
                      best.status != "stable", tokens=True, windows=r.peak_windows)
    # the windows are the answer's best level's: the same level as the findings' peak, or none
    same = peak is not None and best is not None and float(best.level) == float(peak.level)
    return Figure(peak.throughput if peak else None, r.findings.cost_per_1000_at_peak,
                  peak is not None and peak.status != "stable", windows=r.peak_windows if same else ())


def _unique_labels(labels: list[str], summaries: list[RecordingSummary]) -> list[str]:
    """Runs of one label told apart by what differs: the transport first, then the start time
    (UTC), and a number only when both are the same."""
    out = list(labels)
    tells: tuple[Callable[[RecordingSummary], str], ...] = (lambda s: s.transport, _start_time)
    for tell in tells:
        for label in set(out):
            same = [i for i, one in enumerate(out) if one == label]
            told = [tell(summaries[i]) for i in same]
            if len(same) > 1 and len(set(told)) > 1:
                for i, word in zip(same, told, strict=True):
                    out[i] = f"{label} {word}"
    return unique_names(out, mark=" #")


def _start_time(summary: RecordingSummary) -> str:
    if summary.first_ts is None:
        return "start not recorded"
    return datetime.fromtimestamp(summary.first_ts, UTC).strftime("%H:%M:%S")


def _base_for(run: RunComparison, runs: list[RunComparison]) -> RunComparison | None:
    key = (gpu_slug(run.summary.gpu_model, run.summary.gpu_count), run.summary.model)
    for other in runs:
        s = other.summary
        if other.n == 1 and (gpu_slug(s.gpu_model, s.gpu_count), s.model) == key:
            return other
    return None


def _differs(runs: list[RunComparison], get: Callable[[RunComparison], Any]) -> str | None:
    """"a (run1) vs b (run2)" when the runs disagree on a value, else None."""
    values = [(get(r), r.label) for r in runs]
    # canonical form: the same config read back with its keys in another order is the same config,
    # and 10 is 10.0 (a level or a setting written once as an integer, once as a float)
    if len({json.dumps(_same_numbers(v), sort_keys=True, default=str) for v, _ in values}) <= 1:
        return None
    return "; ".join(f"{v if v not in (None, '') else 'unset'} ({label})" for v, label in values)


def _same_numbers(value: Any) -> Any:
    """Numbers as floats, through lists and tables (booleans stay booleans)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Mapping):
        return {k: _same_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_same_numbers(v) for v in value]
    return value


def _getter(read: Callable[[RunComparison, str], Any], key: str) -> Callable[[RunComparison], Any]:
    """``read`` with ``key`` bound (a lambda default argument is lost on mypy)."""
    return lambda r: read(r, key)


# Model-config keys a study's variants differ in by design, as the reader knows them
STUDY_VARIABLES = {"instance_group": "model instances", "parameters.cpu_threads": "threads per CPU instance"}


def _instances(config: Mapping[str, Any]) -> str:
    groups = config.get("instance_group")
    if not isinstance(groups, list):
        return "not known"
    def one(group: Mapping[str, Any]) -> str:
        count = group.get("count", 1)
        if group.get("kind") == "KIND_CPU":
            return f"{count} on CPU"
        gpus = group.get("gpus")
        return f"{count} per GPU" + (f" on GPUs {','.join(map(str, gpus))}" if isinstance(gpus, list) and gpus else "")

    return " + ".join(one(g) for g in groups if isinstance(g, Mapping)) or "not known"


def _check_apples_to_apples(c: Comparison, priced: Mapping[str, str] | None = None, study: bool = False) -> None:
    """Where the runs are not apples to apples: ``c.mismatches`` for differences that make the
    level-by-level figures meaningless (another model, other levels), ``c.notes`` for those a
    reader must weigh (transport, input data, versions, an unstable peak, how a run is priced).
    ``study``: the runs are one study's configs, whose model config differs by design."""
    _compare_workloads(c)
    _compare_model_configs(c, study)
    _compare_levels(c)
    _compare_setups(c)
    for r in c.runs:
        _note_run(c, r, priced or {})


def _compare_workloads(c: Comparison) -> None:
    """The model, its batch size, inputs and weights, and the load mode."""
    checks: list[tuple[str, Callable[[RunComparison], Any], bool]] = [
        ("model", lambda r: r.summary.model, True),
        ("batch size", lambda r: r.summary.batch_size, True),
        ("load mode", lambda r: r.summary.load_mode, True),
        ("model inputs", lambda r: r.summary.server.get("inputs"), True),
        ("weights", lambda r: r.summary.weights or "random", False),
    ]
    for what, get, breaks in checks:
        if (diff := _differs(c.runs, get)) is not None:
            (c.mismatches if breaks else c.notes).append(f"{what} differs: {diff}")


def _compare_model_configs(c: Comparison, study: bool) -> None:
    """Each key of the model configs (the variant's own keys aside); in a study, what differs is
    the study's variable, not a mismatch."""
    runs = c.runs
    configs = {r.label: config_leaves({k: v for k, v in r.summary.model_config.items() if k not in VARIANT_KEYS})
               for r in runs}
    keys = sorted({k for cfg in configs.values() for k in cfg})
    if study and (diff := _differs(runs, lambda r: _instances(r.summary.model_config))) is not None:
        c.notes.append(f"{STUDY_VARIABLES['instance_group']}: the study's variable ({diff})")
    for key in keys:
        if (diff := _differs(runs, _getter(lambda r, k: configs[r.label].get(k), key))) is not None:
            if study:  # the study serves one model with each variant's config: what differs, it chose
                c.notes.append(f"{STUDY_VARIABLES.get(key, 'model config ' + key)}: the study's variable ({diff})")
            else:
                c.mismatches.append(f"model config differs in {key}: {diff}")


def _compare_levels(c: Comparison) -> None:
    """The levels each run planned and measured: level-by-level figures need levels in common."""
    level_sets = {r.label: {p.level for p in r.findings.points} for r in c.runs}
    planned = {r.label: set(r.summary.levels_planned) for r in c.runs}
    if len({frozenset(v) for v in planned.values()}) > 1:
        c.mismatches.append("concurrency levels differ: " + "; ".join(
            f"{', '.join(num.level_value(x) for x in sorted(v)) or 'none'} ({label})" for label, v in planned.items()))
    for label, levels in level_sets.items():
        if missing := sorted(planned[label] - levels):
            c.notes.append(f"{label}: no result at level {', '.join(num.level_value(x) for x in missing)}")
    if level_sets and not set.intersection(*level_sets.values()):
        c.mismatches.append("no level was measured by every run: level-by-level figures are empty")


def _compare_setups(c: Comparison) -> None:
    """How each run was measured: transport, input data, GPU sharing, measurement settings and
    software versions."""
    runs = c.runs
    load = {r.label: (r.summary.metadata.get("profile") or {}).get("load") or {} for r in runs}
    if (diff := _differs(runs, lambda r: r.summary.transport)) is not None:
        c.notes.append(f"transport differs: {diff}: the inputs took different paths to the server, so the runs "
                       "compare serving paths as well as GPUs")
    if (diff := _differs(runs, lambda r: r.summary.inputs_key)) is not None:
        sent = "; ".join(f"{r.summary.inputs_text} ({r.label})" for r in runs)
        c.notes.append(f"input data differs: {sent}: the runs sent different inputs, so a model whose work depends "
                       "on its inputs did different work")
    # the embedded server's MPS (engine/server/mps.py); a remote server's is not known
    if (diff := _differs(runs, lambda r: "MPS" if r.summary.mps else "no MPS or not known")) is not None:
        c.notes.append(f"GPU sharing differs: {diff}: with MPS the model instances share each GPU, without it they "
                       "take turns, so the runs compare server set-ups as well as GPUs")
    for key in MEASUREMENT_KEYS:
        if (diff := _differs(runs, _getter(lambda r, k: load[r.label].get(k), key))) is not None:
            c.notes.append(f"measurement setting load.{key} differs: {diff}")
    for key in VERSION_KEYS:
        if key in CLIENT_SIDE_VERSIONS and not all(r.summary.server.get("embedded") for r in runs):
            continue  # the client's torch says nothing of a remote server: it never served these runs
        if (diff := _differs(runs, _getter(_version, key))) is not None:
            c.notes.append(f"{key} version differs: {diff}")


def _note_run(c: Comparison, r: RunComparison, priced: Mapping[str, str]) -> None:
    """What a reader must know of one run: how it ended, its scaling base, its sweeps, whether its
    answer was decided, and how it is priced."""
    if r.summary.status != "ok":
        c.notes.append(f"{r.label}: session status {r.summary.status or 'unknown (no end recorded)'}")
    if r.n and r.n > 1 and r.base_label is None:
        c.notes.append(f"{r.label}: no 1x {r.summary.gpu_model} run of {r.summary.model} to compute scaling from")
    if r.findings.sweep_note:
        c.notes.append(f"{r.label}: {len(r.summary.sweeps)} sweeps recorded; compared: {r.findings.sweep_note}")
    answer = r.findings.answer
    if answer is not None and answer.not_decided:
        c.notes.append(f"{r.label}: not decided: {answer.not_decided}")
    elif answer is not None and answer.left_out:
        c.notes.append(f"{r.label}: its peak and cost rest on its sound levels; left out: "
                       f"{'; '.join(answer.left_out)}")
    if r.findings.label in priced and scale_out_parts(r.summary.config_variant):
        c.notes.append(f"{r.label}: priced at ${r.summary.cost_per_hour:g}/hr ({priced[r.findings.label]})")
    elif r.findings.label in priced:
        c.notes.append(f"{r.label}: priced at ${r.summary.cost_per_hour:g}/hr for {r.n} GPU(s) ({priced[r.findings.label]})")
    elif r.n and r.summary.gpu_count and r.n < r.summary.gpu_count and r.summary.cost_per_hour:
        c.notes.append(f"{r.label}: uses {r.n} of the box's {r.summary.gpu_count} GPUs; its cost is the whole box's "
                       f"${r.summary.cost_per_hour:g}/hr (a smaller box would cost less)")
    if r.summary.cost_per_hour is None:
        c.notes.append(f"{r.label}: " + (SCALE_OUT_UNPRICED if scale_out_parts(r.summary.config_variant) else
                                        "hardware.cost_per_hour not set") + ": no cost per 1000 images")


def _version(r: RunComparison, key: str) -> Any:
    if key == "triton":
        return r.summary.server.get("triton_version") or r.summary.versions.get("triton")
    return r.summary.versions.get(key)


# --------------------------------------------------------------------------- rendering


def render_compare(comparison: Comparison, fmt: str = "text") -> str:
    """"text" (a plain table for the terminal), "md" or "html" (self-contained, with charts)."""
    renderers = {"text": to_text, "md": to_markdown, "html": to_html}
    if fmt not in renderers:
        raise UserError(f"unknown comparison format {fmt!r} (known: text, md, html)")
    return renderers[fmt](build_compare_doc(comparison))


def _efficiency_at_peak(r: RunComparison) -> str:
    """The run's scaling efficiency for the summary table; the base run is 100 % by definition."""
    if r.n == 1 and r.base_label == r.label:
        return "100 % (base)"
    return num.percent(r.scaling.efficiency) if r.scaling else num.NA


def build_compare_doc(c: Comparison) -> Doc:
    doc = Doc("gpuscale-tui comparison: " + " vs ".join(r.label for r in c.runs))
    if c.mismatches:
        doc.add(Heading("Apples-to-apples check"))
        doc.add(*[Note(m, warning=True) for m in c.mismatches])
    else:
        data_differs = any(n.startswith("input data differs") for n in c.notes)
        doc.add(Heading("Apples-to-apples check"), Para(
            "Same model, model config (apart from its instance groups), model inputs (names, types, shapes), batch "
            "size, load mode and levels in every run" + ("; the input data sent differs (below)." if data_differs
                                                         else ".")))
    if c.notes:
        doc.add(Bullets(c.notes))
    if all(r.summary.random_weights for r in c.runs):
        doc.add(Note(RANDOM_WEIGHTS_NOTE))

    rows = []
    streaming = bool(c.runs) and all(r.findings.streaming for r in c.runs)  # compare refuses a mix
    for r in c.runs:
        f, s = r.findings, r.summary
        sat = f.saturation
        served = f.peak_tokens_per_s if streaming else (f.peak.throughput if f.peak else None)
        rows.append([
            r.label, str(r.n) if r.n else num.NA, num.rate(served),
            num.level_value(f.peak.level) if f.peak else num.NA, f.peak.status if f.peak else num.NA,
            num.ms(f.peak.p99 if f.peak else None),
            num.level_value(sat.level) if sat and sat.reached and sat.level is not None else "not reached",
            num.times(r.scaling.speedup if r.scaling else None), _efficiency_at_peak(r),
            f"${s.cost_per_hour:g}" if s.cost_per_hour else num.NA,
            num.money(f.cost_per_million_tokens_at_peak if streaming else f.cost_per_1000_at_peak),
            f.verdict.kind,
        ])
    items, cost = ("tokens", "$ / million tokens") if streaming else ("images", "$ / 1000 images")
    doc.add(Heading("Summary"), Table(["Run", "GPUs", f"Peak {items}/s", "at level", "Stability", "p99 at peak ms",
                                       "Saturation",
                                       "Speedup", "Scaling eff.", "$/hr", cost, "Bottleneck"], rows))
    doc.add(Para("Scaling efficiency = peak_N / (N x peak_1) against the 1x run of the same GPU and model; "
                 "saturation = the lowest level within 5 % of the run's peak throughput; "
                 + ("cost per million output tokens = $/hr / (tokens/s x 3600) x 10^6 at the peak." if streaming else
                    "cost per 1000 images = $/hr / (images/s x 3600) x 1000 at the peak.")))
    doc.add(*_per_level(c))
    doc.add(Heading("Bottlenecks"))
    for r in c.runs:
        v = r.findings.verdict
        doc.add(Para(f"{r.label}: {v.kind}: {v.summary}."), Bullets(v.evidence + [x.text for x in v.findings]))
    if c.scale_answers:
        doc.add(Heading("Scale out or scale up"), *[Para(line[0].upper() + line[1:] + ".") for line in c.scale_answers])
    doc.add(Heading("Recommendation"), Bullets(_recommend(c)))
    if c.gates:  # the gates' results belong in the report as well as in the exit code
        if c.gate_failures:
            said = "failed" if all(gate_word(f) == "gate failed" for f in c.gate_failures) else "failed or not judged"
            doc.add(Heading("Gates"), Note(f"{len(c.gate_failures)} gate(s) {said} (exit code "
                                           f"{gate_exit_code(c.gate_failures)}):", warning=True),
                    Bullets([f"{gate_word(f)}: {f}" for f in c.gate_failures]))
        else:
            doc.add(Heading("Gates"), Para("Every gate passed:"), Bullets(c.gates))
    doc.add(*_charts(c))
    return doc


def _per_level(c: Comparison) -> list:
    header = ["Level", *(r.label for r in c.runs)]

    def table(get: Callable[[RunComparison, float], str], caption: str) -> Table:
        return Table(header, [[num.level_value(lv), *(get(r, lv) for r in c.runs)] for lv in c.levels], caption)

    def throughput(r: RunComparison, lv: float) -> str:
        p = point_at(r.findings.points, lv)
        if p is None:
            return num.NA
        return num.rate(p.throughput) + ("" if p.status == "stable" else f" ({p.status})")

    def p99(r: RunComparison, lv: float) -> str:
        p = point_at(r.findings.points, lv)
        return num.ms(p.p99) if p else num.NA

    def efficiency(r: RunComparison, lv: float) -> str:
        return num.percent(r.scaling.by_level.get(lv)) if r.scaling else num.NA

    blocks: list = [Heading("Per level"), table(throughput, "Throughput, images/s"), table(p99, "p99 latency, ms")]
    if any(r.scaling and r.n and r.n > 1 for r in c.runs):
        blocks.append(table(efficiency, "Scaling efficiency at the same level (vs the 1x run)"))
    return blocks


def _recommend(c: Comparison) -> list[str]:
    out = []
    if c.study_verdict:  # one answer: the study's, which weighs each added GPU, not the fastest run alone
        out.append(f"The study's verdict: {c.study_verdict[0].upper()}{c.study_verdict[1:]}.")
    tokens = [r for r in c.runs if r.findings.cost_per_million_tokens_at_peak is not None]
    if tokens:  # streaming runs: their tokens, priced per million
        cheapest = min(tokens, key=lambda r: r.findings.cost_per_million_tokens_at_peak or 0.0)
        out.append(f"Cheapest per token: {cheapest.label} at {num.money(cheapest.findings.cost_per_million_tokens_at_peak)} "
                   f"per million output tokens ({num.rate(cheapest.findings.peak_tokens_per_s)} tokens/s"
                   f"{unstable_mark(cheapest.findings.peak, inside=True)}).")
    priced = [r for r in c.runs if r.findings.cost_per_1000_at_peak is not None]
    if priced:
        best = min(priced, key=lambda r: r.findings.cost_per_1000_at_peak or 0.0)
        out.append(f"Cheapest per image: {best.label} at {num.money(best.findings.cost_per_1000_at_peak)} per 1000 images "
                   f"({num.rate(best.findings.peak.throughput if best.findings.peak else None)} images/s"
                   f"{unstable_mark(best.findings.peak, inside=True)}).")
    fastest = max((r for r in c.runs if r.findings.peak), key=lambda r: r.findings.peak.throughput, default=None)  # type: ignore[union-attr]  # filtered to runs that have one
    if fastest is not None and fastest.findings.peak is not None:
        why = (" (the study's verdict above weighs what each step adds, not the fastest run alone)"
               if c.study_verdict else "")
        out.append(f"Highest throughput: {fastest.label} at {num.rate(fastest.findings.peak.throughput)} images/s"
                   f"{unstable_mark(fastest.findings.peak)}{why}.")
    for r in c.runs:
        if not (r.n and r.n > 1 and r.scaling and r.scaling.efficiency is not None):
            continue
        e = r.scaling.efficiency
        if e > SUPERLINEAR:
            out.append(f"{r.label} scales beyond linear ({num.percent(e)} of {r.n}x the 1x run): check that the runs "
                       "are comparable (batch size, model config) before trusting it.")
        elif e >= NEAR_LINEAR:
            out.append(f"{r.label} scales near-linearly ({num.percent(e)} of {r.n}x the 1x run): multi-GPU pays off.")
        elif e >= SCALES_WELL:
            out.append(f"{r.label} scales well ({num.percent(e)}): multi-GPU is worth it where one box must serve the load.")
        else:
            out.append(f"{r.label} scales poorly ({num.percent(e)}, verdict {r.findings.verdict.kind}): several 1-GPU "
                       "boxes behind a load balancer may serve more per dollar.")
    if c.mismatches:
        out.append("Fix the apples-to-apples differences above before drawing conclusions from these figures.")
    if out:
        return out
    if any(r.findings.points for r in c.runs):  # figures, but none from a sound level
        return ["No sound level in any run: their levels produced figures, but none is sound, so none is ranked; "
                "measure again on a quieter box or with more windows."]
    return ["No run produced a result."]


def _charts(c: Comparison) -> list:
    def series(key: Callable[[Any], float | None], scale: float = 1.0) -> list[svg.Series]:
        return [svg.Series(r.label, [(p.level, v * scale) for p in r.findings.points if (v := key(p)) is not None])
                for r in c.runs]

    blocks: list = [
        Chart(svg.line_chart("Throughput vs concurrency", series(lambda p: p.throughput), "concurrency", "images/s",
                             log2_x=True), "Throughput of every run at each level"),
        Chart(svg.line_chart("p99 latency vs concurrency", series(lambda p: p.p99, 1000.0), "concurrency",
                             "p99 latency (ms)", log2_x=True), "p99 latency of every run at each level"),
    ]
    scaled = [r for r in c.runs if r.scaling and r.scaling.efficiency is not None]
    if scaled:
        blocks.append(Chart(svg.bar_chart("Scaling efficiency at the peak", [r.label[:18] for r in scaled],
                                          [("efficiency %", [(r.scaling.efficiency or 0) * 100 for r in scaled])],  # type: ignore[union-attr]  # filtered to runs that have one
                                          "%"), "peak_N / (N x peak_1)"))
    priced = [r for r in c.runs if r.findings.cost_per_1000_at_peak is not None]
    if priced:
        blocks.append(Chart(svg.bar_chart("Cost per 1000 images at the peak", [r.label[:18] for r in priced],
                                          [("$ / 1000 images", [r.findings.cost_per_1000_at_peak for r in priced])],
                                          "$", y_format=lambda v: f"{v:.3g}"), "Lower is better"))
    return blocks
