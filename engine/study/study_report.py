"""The study report (Markdown and HTML from the same blocks, as the other reports): per-config
table, SLO point, energy, marginal gain per added GPU, "stop at N GPUs" with its reason (or, where
the request path capped every config, what limited them instead), and the
throughput-vs-concurrency chart with one line per config."""

from __future__ import annotations

import os
from pathlib import Path

from engine import format as fmt
from engine.analysis.scaling_forecast import Z95, arm_lines
from engine.analysis.sweep_summary import SweepPoint
from engine.errors import UserError
from engine.modes import mode_of
from engine.record import svg
from engine.record.compare import compare
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
from engine.record.findings import RANDOM_WEIGHTS_NOTE
from engine.record.naming import free_name, new_file, safe_output_path
from engine.record.recording_report import knee_chart, stream_points
from engine.study.figures import ConfigFigures, StudyFigures, answer_line, recommendation
from engine.study.pareto import left_out, pareto_points


def _j(value: float | None) -> str:
    return fmt.NA if value is None else f"{value:.4g}"


def _money_change(value: float | None) -> str:
    """+$0.0000218, -$0.000105: as the table's other dollar figures, with a sign (not +2.181e-05)."""
    if value is None:
        return fmt.NA
    return ("+" if value > 0 else "-" if value < 0 else "") + fmt.money(abs(value))


def _unstable(point: SweepPoint | None) -> str:
    return " (unstable)" if point is not None and point.status != "stable" else ""


def _config(c: ConfigFigures) -> str:
    return f"{c.variant} (failed)" if c.failed else c.variant


def _slo_cells(c: ConfigFigures) -> list[str]:
    p = c.slo
    if p is None:
        return [fmt.NA, fmt.NA, fmt.NA]
    if p.level is None:
        return ["none meets it", fmt.NA, fmt.NA]
    level = fmt.level_value(p.level) + ("" if p.bounded else " (not bounded)")
    return [level, fmt.rate(c.tokens_slo if c.streaming else p.throughput), fmt.ms(p.latency_s)]


def build_study_doc(f: StudyFigures) -> Doc:
    ix = f.index
    first = f.configs[0].summary
    box = f"{first.gpu_count}x {first.gpu_model}" if first.gpu_count else "CPU only"
    doc = Doc(f"gpuscale-tui scaling study: {ix.model} on {box}")
    doc.add(Para(answer_line(f)))  # the answer first, as the study's last line says it
    doc.add(Para(f"Profile {ix.profile}; variants {', '.join(ix.variants)}; server: {ix.server}; "
                 f"latency target: {ix.slo or 'none (peak only)'}; inputs: {first.inputs_text}; "
                 f"study status: {ix.status}."))
    if len({c.summary.inputs_key for c in f.configs}) > 1:
        doc.add(Note("The configs sent different inputs: " + "; ".join(
            f"{c.variant}: {c.summary.inputs_text}" for c in f.configs) + ".", warning=True))
    if ix.missing:
        doc.add(Note(f"Missing from this study (not finished): {', '.join(ix.missing)}.", warning=True))
    for why in f.failed.values():
        doc.add(Note(f"{why[0].upper()}{why[1:]}: it decides nothing (its figures, where it has any, are shown as "
                     "measured, with no efficiency and no cost).", warning=True))
    for c in f.configs:
        if c.findings.stability_caveat:
            doc.add(Note(f"{c.variant}: {c.findings.stability_caveat}", warning=True))
    if all(c.summary.random_weights for c in f.configs):
        doc.add(Note(RANDOM_WEIGHTS_NOTE))
    cap = f.request_cap
    if cap is not None:  # no size to stop at: say what held every config, with each one's evidence
        crowded = (f"Other processes on this host took most of its CPU (others {fmt.percent_points(cap.others_percent)} "
                   "of the host): measure again on a quieter box before sizing on these figures. "
                   if cap.others_percent is not None else "")
        doc.add(Heading("What limits every config"),
                Para(f"{crowded}The request path, not the {f.unit}s: every config topped out within "
                     f"{fmt.percent(1 - min(p for _, p in cap.peaks) / cap.ceiling)} of {fmt.rate(cap.ceiling)} "
                     f"{'tokens' if f.streaming else 'images'}/s, with a bound on the request path at the peak of "
                     f"each config larger than the smallest: the added {f.unit}s did not raise throughput, and what the "
                     "study measured is the request path's ceiling. "
                     "At each config's peak:"),
                Bullets(list(cap.evidence)))
    # the study's answer in pictures, before the tables it comes from
    # (the answer line of engine/analysis goes above them, once it exists)
    doc.add(*_charts(f))

    # three narrow tables, not one wide one: a page of about 1000 px holds each whole
    units = "GPUs" if f.unit == "GPU" else "Instances"
    # a streaming model's figures are output tokens: tokens/s, $ per million tokens, J per token
    items = "tokens" if f.streaming else "images"
    cost_head, j_head = ("$ / million tokens", "J / token") if f.streaming else ("$ / 1000 images", "J / image")
    peak_rows, slo_rows, verdict_rows = [], [], []
    for c in f.configs:
        fi = c.findings
        sat = fi.saturation
        peak_rows.append([
            _config(c), f"{c.units} (on {c.shared_gpus})" if c.shared_gpus else str(c.units),
            fmt.rate(c.peak_throughput) + _unstable(fi.peak),
            fmt.level_value(fi.peak.level) if fi.peak else fmt.NA, fmt.ms(fi.peak.p99 if fi.peak else None),
            fmt.percent(c.efficiency_peak),
            fmt.money(c.cost_mtok_peak if f.streaming else c.cost_peak),
            _j(c.j_per_token_peak if f.streaming else c.j_per_image_peak),
        ])
        slo_rows.append([_config(c), *_slo_cells(c), fmt.percent(c.efficiency_slo),
                         fmt.money(c.cost_mtok_slo if f.streaming else c.cost_slo),
                         _j(c.j_per_token_slo if f.streaming else c.j_per_image_slo)])
        verdict_rows.append([
            c.variant, fmt.level_value(sat.level) if sat and sat.reached and sat.level is not None else "not reached",
            fi.verdict.kind,
        ])
    doc.add(Heading("Per config"),
            Table(["Config", units, f"Peak {items}/s", "at level", "p99 at peak ms", "Efficiency",
                   cost_head, j_head], peak_rows, "At each config's peak"))
    if f.slo:
        slo_name = f"{f.slo.percentile} <= {f.slo.target_s * 1000:g} ms"
        doc.add(Table(["Config", "SLO level", f"{items}/s", f"{f.slo.percentile} ms", "Efficiency",
                       cost_head, j_head], slo_rows, f"At the latency target ({slo_name})"))
    doc.add(Table(["Config", "Saturation", "Bottleneck"], verdict_rows, "Where each config saturates, and what limits it"))
    priced = ("cost per million output tokens = $/hr / (tokens/s x 3600) x 10^6 (a response is one token "
              "unless load.tokens_from names its count)." if f.streaming
              else "cost per 1000 images = $/hr / (images/s x 3600) x 1000.")
    doc.add(Para(f"Efficiency = ({items}/s per {f.unit}) / ({items}/s per {f.unit} of {f.configs[0].variant}); "
                 f"saturation = the lowest level within 5 % of the config's peak; {priced}"))
    for c in f.configs:
        if c.shared_gpus:
            doc.add(Para(f"{c.variant}: its {c.units} servers shared this box's {c.shared_gpus} GPU(s), which shows "
                         "the mechanics of scale-out, not what separate boxes would do: no efficiency is given."))
    if f.slo:
        doc.add(Para(f"SLO point: of the levels whose {f.slo.percentile} stays under "
                     f"{f.slo.target_s * 1000:g} ms below the lowest level that missed it, the one with the most "
                     f"images/s (throughput can fall past a peak while latency still meets the target); the "
                     f"highest such {mode_of(first.load_mode).name} is found by bisection after the planned levels "
                     f"(at most {fmt.plural(ix.search_steps, 'extra level')} per config, as perf_analyzer's "
                     "--latency-threshold --binary-search). \"not bounded\": no measured level missed the target."))
    sources = sorted({c.energy_source for c in f.configs if c.energy_source})
    doc.add(Heading("Energy"), Para(
        (f"{j_head} = the increase of the GPUs' cumulative energy counter over the level's merged measurement "
         "windows (the GPUs the config runs on: its instance groups', or those its servers are pinned to), "
         f"divided by the {items} completed in them. "
         f"Source: {'; '.join(sources)}.") if sources else
        f"No GPU energy counter was recorded (no GPU, or no NVML / Triton GPU metrics): {j_head} is not measured."))
    doc.add(Heading("Cost basis"), Bullets([f"{c.variant}: {c.cost_basis}" for c in f.configs]))

    step_rows = [[f"{s.from_variant} -> {s.to_variant}", str(s.added_units),
                  fmt.NA if s.gain_per_unit is None else f"{s.gain_per_unit:+,.1f}", fmt.percent(s.marginal),
                  _money_change(s.cost_change)] for s in f.steps]
    if step_rows:
        doc.add(Heading(f"Marginal gain per added {f.unit}"),
                Table(["Step", f"Added {units}", f"{items}/s per added {f.unit} ({f.basis})",
                       f"Share of one {f.unit} in {f.configs[0].variant}", f"Change in {cost_head}"], step_rows))
    recommend = recommendation(f)
    doc.add(Heading("Recommendation"), Para(recommend[0].upper() + recommend[1:] + "."))
    doc.add(*_scale_out(f))
    doc.add(*_forecasts(f))

    if len(f.recordings) >= 2:
        comparison = compare(f.recordings, study_verdict=f.stop.reason)
        if comparison.mismatches:
            doc.add(Heading("Apples-to-apples check"), *[Note(m, warning=True) for m in comparison.mismatches])
    doc.add(Heading("Bottlenecks"))
    for c in f.configs:
        v = c.findings.verdict
        doc.add(Para(f"{c.variant}: {v.kind}: {v.summary}."), Bullets(v.evidence + [x.text for x in v.findings]))
    doc.add(Heading("Recordings"), Bullets([f"{r.variant}: {r.recording or 'none'} (status {r.status}"
                                            + (f", {r.error}" if r.error else "") + ")" for r in ix.runs]))
    return doc


def _scale_out(f: StudyFigures) -> list:
    """Scale out or scale up: each scale-out config beside the one-server config of its size,
    each priced as what it is, then the answer in one line."""
    if not f.scale:
        return []
    rows = []
    for s in f.scale:
        if s.out is None:  # refused before any recording
            rows.append([f"{s.variant} (failed)", "scale out", *[fmt.NA] * (5 if f.slo else 3)])
        for c, how in ((s.out, "scale out"), (s.up, "scale up")):
            if c is None:
                continue
            slo = c.slo.throughput if c.slo and c.slo.level is not None else None
            if c.streaming:
                slo = c.tokens_slo
            peak_cost, slo_cost = (c.cost_mtok_peak, c.cost_mtok_slo) if f.streaming else (c.cost_peak, c.cost_slo)
            rows.append([_config(c), how, fmt.money(c.cost_per_hour), fmt.rate(c.peak_throughput) + _unstable(c.findings.peak),
                         fmt.money(peak_cost), *([fmt.rate(slo), fmt.money(slo_cost)] if f.slo else [])])
    items, cost = ("tokens", "$ / million tokens") if f.streaming else ("images", "$ / 1000 images")
    slo_cols = [f"{items}/s at {f.slo.percentile} <= {f.slo.target_s * 1000:g} ms", f"{cost} at SLO"] if f.slo else []
    return [Heading("Scale out or scale up"),
            Table(["Config", "Way", "$ / hr", f"Peak {items}/s", f"{cost} at peak", *slo_cols], rows,
                  "N servers of one GPU each, priced as N one-GPU boxes, against one box of N GPUs at its own price"
                  if f.unit == "GPU" else "N servers of the cpu config, priced as N boxes, against one server of N "
                  "instances on one box"),
            *[Para(s.answer.line[0].upper() + s.answer.line[1:] + ".") for s in f.scale]]


def _forecasts(f: StudyFigures) -> list:
    """Predict, then check: each larger config's peak predicted from the smaller configs of its
    arm, the measured peak beside it (in its own column) where the study ran it."""
    if not f.forecasts:
        return []
    items = "tokens" if f.streaming else "images"
    rows, why = [], []
    for fc in f.forecasts:
        if fc.choice is None:
            continue
        m = fc.measured.point if fc.measured is not None else None
        measured = fmt.rate(m.rate) if m is not None else ("not run" if fc.measured is None else fc.measured.why_not)
        rows.append([fc.arm, fc.config, fmt.rate(fc.predicted), fc.interval_words.removesuffix(", 95 %"),
                     ", ".join(p.config for p in fc.basis), fc.choice.fit.words, measured, fc.check or fmt.NA])
        why.append(f"{fc.config} ({fc.arm}) from {', '.join(p.config for p in fc.basis)}: {fc.choice.fit.words}: "
                   f"{fc.choice.why}" + (f"; left out: {'; '.join(fc.left_out)}" if fc.left_out else ""))
    none = [line.removeprefix("forecast, ") for line in arm_lines(f.forecasts) if ": no forecast: " in line]
    out: list = [Heading("Predicted from the smaller configs")]
    if rows:
        out.append(Table(["Arm", "Config", f"Predicted peak {items}/s", "95 % interval", "From", "Law",
                          f"Measured peak {items}/s", "Check"], rows,
                         "Predicted figures, not measured ones: the measured peak is beside them where the study ran "
                         "the config"))
        out.append(Para(
            "Fitted to each config's peak (a sound level of a config that ran OK): the Universal Scalability Law "
            "X(N) = λN / (1 + σ(N-1) + κN(N-1)), or Amdahl's law (κ = 0) or linear scaling (σ = κ = 0). With two "
            "unit counts the USL is under-determined: linear unless the larger count falls below it by more than "
            f"{Z95:.2f} standard deviations of the measured spread, else Amdahl; with three or more, the law with "
            "the least leave-one-out error (Amdahl needs three unit counts, the USL four). Each point's spread is "
            "the standard deviation of its peak level's measurement windows; the interval carries it through the "
            f"fit (±{Z95:.2f} sd, widened where the points scatter more than their spread)."))
        out.append(Bullets(why))
    if none:
        out.append(Bullets([line[0].upper() + line[1:] for line in none]))
    return out


def _charts(f: StudyFigures) -> list:
    """Throughput against load, the percentile the target names (log scale, the target dashed) and
    the knee (p50 and p99 against throughput), one curve per config."""
    mode = mode_of(f.configs[0].summary.load_mode)
    unit = mode.axis
    tp = [svg.Series(c.variant, [(p.level, p.throughput) for p in c.findings.points],
                     hollow=[p.status != "stable" for p in c.findings.points]) for c in f.configs]
    if f.streaming:  # a streaming model's throughput is its output tokens
        tp = [svg.Series(c.variant, stream_points([lv.result for lv in c.findings.levels])) for c in f.configs]
    name = f.slo.percentile if f.slo else "p99"
    lat = []
    for c in f.configs:
        kept = [p for p in c.findings.points if getattr(p, name) is not None]
        lat.append(svg.Series(c.variant, [(p.level, getattr(p, name) * 1000) for p in kept],
                              hollow=[p.status != "stable" for p in kept]))
    rules = [svg.Rule(f.slo.target_s * 1000, f"target {f.slo.target_s * 1000:g} ms", color="#d62728")] if f.slo else []
    slo = (f"{f.slo.percentile} <= {f.slo.target_s * 1000:g} ms", f.slo.target_s) if f.slo else None
    return [
        Heading("The curves"),
        Chart(svg.line_chart(f"Throughput vs {unit}", tp, unit, "tokens/s" if f.streaming else "images/s",
                             log2_x=mode.log2_axis),
              "One line per config; the SLO search adds levels between the planned ones; an open marker is an "
              "unstable level"),
        Chart(svg.line_chart(f"{name} latency vs {unit}", lat, unit, f"{name} latency (ms, log)",
                             log2_x=mode.log2_axis, log_y=True, rules=rules),
              "Log scale" + ("; dashed red: the latency target" if f.slo else "")),
        knee_chart("Latency vs throughput (the knee)", [(c.variant, c.findings.points) for c in f.configs], slo),
        *_pareto(f),
    ]


def _pareto(f: StudyFigures) -> list:
    """A streaming study's Pareto chart: tokens/s per user against $ per million output tokens,
    one curve per config (each level a point); the configs it leaves out are named under it."""
    if not f.streaming:
        return []
    series = []
    for c in f.configs:
        pts = pareto_points(c)
        if pts:
            series.append(svg.Series(c.variant, [(p.cost_mtok, p.per_user) for p in pts],
                                     hollow=[not p.stable for p in pts]))
    missing = left_out(f.configs)
    note = ("Each level a point: $ per million output tokens at that level's tokens/s and the config's $/hr, "
            "against the median request's own decode rate; up and left is better; an open marker is an unstable level; a "
            "level whose chunks were read together (per-user rate not measured) is left out")
    if missing:
        note += f"; not drawn: {', '.join(missing)}"
    if not series:
        return [Para(f"No Pareto chart (tokens/s per user against $/Mtok): {', '.join(missing)}.")]
    return [Chart(svg.line_chart("Tokens/s per user vs $ per million output tokens", series,
                                 "$ per million output tokens", "tokens/s per user", continuous_x=True), note)]


def render_study(f: StudyFigures, fmt_name: str = "text") -> str:
    renderers = {"text": to_text, "md": to_markdown, "html": to_html}
    if fmt_name not in renderers:
        raise UserError(f"unknown study report format {fmt_name!r} (known: text, md, html)")
    return renderers[fmt_name](build_study_doc(f))


def export_study(f: StudyFigures, fmt_name: str, out_dir: Path, name: str | None = None) -> Path:
    """The report beside the index, replacing the study's own report of that name (the same
    report, made again); elsewhere, or where a name is given, never over an existing file."""
    suffix = {"md": ".md", "html": ".html", "text": ".txt"}.get(fmt_name)
    if suffix is None:
        raise UserError(f"unknown study report format {fmt_name!r} (known: md, html, text)")
    out_dir = Path(out_dir).expanduser()
    stem = f.index_path.name.removesuffix(".study.json")
    if name is None and out_dir.resolve() == f.index_path.parent.resolve():
        path = out_dir / f"{stem}{suffix}"
        (out_dir / f".{stem}.new{suffix}").unlink(missing_ok=True)  # left by a run that died mid-write
        with new_file(out_dir / f".{stem}.new{suffix}") as fh:  # complete before it replaces the old one
            fh.write(render_study(f, fmt_name))
        os.replace(out_dir / f".{stem}.new{suffix}", path)
        return path
    if name is None:
        path = free_name(out_dir, stem, suffix)
    else:
        path = safe_output_path(out_dir, name)
        path = path if path.suffix else path.with_name(path.name + suffix)
        if path.exists():
            raise UserError(f"{path}: already exists; not overwriting it (choose another name)")
    with new_file(path) as fh:
        fh.write(render_study(f, fmt_name))
    return path
