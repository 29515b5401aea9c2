"""The report of one recording, shaped like the results document of seed 001: setup, throughput
and latency per level, queue vs compute, saturation, scaling (and the training bill), cost per
1000 images, GPU telemetry, bottlenecks found, recommendation. Markdown and HTML come from the same blocks; the
HTML adds the charts."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

from engine import columns
from engine import format as fmt
from engine.analysis.answer import standing
from engine.analysis.energy import config_gpus, joules_per_token
from engine.analysis.scaling import cost_per_1000, cost_per_million_tokens
from engine.analysis.stream_split import DECOUPLED_SPLIT
from engine.analysis.training_bill import training_bill
from engine.analysis.wire import wire_notes
from engine.events import LevelResult, NetworkPath
from engine.modes import mode_of
from engine.profiles import scale_out_parts
from engine.record import svg
from engine.record.doc import Bullets, Chart, Doc, Heading, Note, Para, Table
from engine.record.findings import RANDOM_WEIGHTS_NOTE, RunFindings, analyze, unstable_mark
from engine.record.gpu_fields import REPORT_COLUMNS
from engine.record.summary import RecordingSummary
from engine.record.timelines import Timelines
from engine.transport_table import transport_spec
from engine.triton.sequences import batcher_line, sequence_config

VERSION_KEYS = ("gpuscale_tui", "triton", "driver", "cuda", "torch", "python")


def stream_points(results: list[LevelResult]) -> list[tuple[float, float]]:
    """(level, output tokens/s) of each standing streaming level that answered, for charts."""
    return [(float(r.level), r.stream.output_tokens_per_s) for r in standing(results)
            if r.stream is not None and r.status != "failed" and r.requests > 0]


def token_figures(f: RunFindings) -> str | None:
    """A streaming sweep's output tokens at the peak and at the SLO point (load.slo's goodput), by
    the answer's rule: tokens/s, $ per million output tokens and J per output token (the mean
    power of the GPUs the model's config uses over the level's span; not measured without their
    power samples, as on a CPU run or for a model on the CPU)."""
    a = f.answer
    if a is None or not a.streaming:
        return None
    s = f.summary
    parts_out = scale_out_parts(s.config_variant)  # a scale-out's servers are pinned to GPUs 0..N-1
    wanted = (set(range(parts_out[1])) if parts_out and parts_out[0] == "1x"
              else config_gpus(s.server.get("model_config") or s.model_config or {}))
    index = {g.uuid: g.index for g in s.gpus}
    power = {float(lv.result.level): {u: w for u, w in lv.gpu.get("power", {}).items()
                                      if wanted is None or index.get(u) in wanted} for lv in f.levels}
    parts = []
    for name, r in (("at the peak", a.best), (f"at {a.target_words}", a.slo_level if a.targeted else None)):
        if r is None or r.stream is None:
            if name != "at the peak" and a.targeted:
                parts.append(f"{name}: no sound level meets it")
            continue
        rate = r.stream.output_tokens_per_s
        cost = cost_per_million_tokens(a.cost_per_hour or 0.0, rate)
        joules = joules_per_token(power.get(float(r.level), {}), rate)
        parts.append(f"{name} ({fmt.level(r.mode, r.level)}): {fmt.rate(rate)} tokens/s, "
                     + (f"{fmt.money(cost)} per million output tokens" if cost is not None else "no price set")
                     + ", " + (f"{joules:.3g} J per output token" if joules is not None
                               else "J per output token not measured (no power samples of the GPUs the model uses)"))
    return "Output tokens: " + "; ".join(parts) + "." if parts else None


def utc(ts: float | None) -> str:
    if ts is None:
        return fmt.NA
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def build_report(summary: RecordingSummary, findings: RunFindings | None = None,
                 timelines: Timelines | None = None) -> Doc:
    """``timelines`` (engine/record/timelines.py) adds the time-axis charts: windows' throughput
    and latency with the level boundaries, each GPU's utilization, power and memory."""
    f = findings or analyze(summary)
    s = summary
    doc = Doc(f"gpuscale-tui results: {s.label}")
    if f.answer is not None and f.answer.levels:
        doc.add(Para(f.answer.line))  # the answer first, as the run's last line and the TUI header say it
        if (tokens := token_figures(f)) is not None:
            doc.add(Para(tokens))
    status = s.status or "no end recorded (interrupted, or still running)"
    doc.add(Para(f"Recorded {utc(s.first_ts)}, {fmt.duration(s.duration_s)}, status: {status}. "
                 f"File: {Path(s.path).name}"))
    if f.stability_caveat:
        doc.add(Note(f.stability_caveat, warning=True))
    if s.random_weights:
        doc.add(Note(RANDOM_WEIGHTS_NOTE))
    doc.add(*_setup(s))
    doc.add(*_box_check(s))
    # a probe-only session has no sweep: its sections would only say "no level" five times
    sweep = bool(f.points) or s.mode != "probe"
    tag = f" ({f.sweep_note})" if f.sweep_note else ""
    if sweep:
        if tag:  # several sweeps: each gets its own tables; none is merged with another
            doc.add(Para(f"This session ran {len(s.sweeps)} sweeps, reported one by one. The peak, cost, "
                         f"bottleneck and recommendation are from {f.sweep_note}."))
        for run in s.sweeps if tag else [None]:
            per = f if run is None or run.number == f.sweep else analyze(s, run.number)
            per_tag = f" ({per.sweep_note})" if tag else ""
            doc.add(*_levels(per, per_tag))
            doc.add(*_breakdown(per, per_tag))
            doc.add(Heading("Saturation point" + per_tag),
                    Para(per.saturation.describe() if per.saturation else _no_saturation(per)))
        doc.add(Para("Saturation point: the lowest level whose throughput is within 5 % of the sweep's maximum; "
                     "beyond it, more load adds almost no throughput and only queueing latency."))
        if timelines is not None:
            doc.add(*_over_time(timelines, s))
    doc.add(*_scaling(f))
    if sweep:
        doc.add(*_cost(f, tag))
    doc.add(*_telemetry(f, timelines))
    if sweep:
        doc.add(*_wire(f, tag))
        doc.add(Heading("Bottlenecks found" + tag), Para(f"Verdict: {f.verdict.kind}: {f.verdict.summary}."))
        if f.verdict.evidence:
            doc.add(Bullets(f.verdict.evidence))
        if f.verdict.findings:
            doc.add(Para("Also found:"), Bullets([x.text for x in f.verdict.findings]))
        doc.add(Heading("Recommendation" + tag), Bullets(f.recommendation))
    if s.warnings or s.errors:
        doc.add(Heading("Warnings and errors"), Bullets([*s.errors, *s.warnings]))
    return doc


def _setup(s: RecordingSummary) -> list:
    n = s.gpus_in_config
    rows = [
        ["Profile", s.profile_name],
        ["Hardware", f"{s.gpu_count}x {s.gpu_model}" if s.gpu_count else "no GPU"],
        ["Model config", f"{s.model or fmt.NA}, variant {s.config_variant or fmt.NA}"
                         + (f" ({n} GPU{'s' if n != 1 else ''})" if n else "")],
        ["Weights", s.weights or "random (no weights file)"],
        ["Load", f"{s.load_mode or fmt.NA}, inputs by {transport_spec(s.transport).inputs_by}, batch {s.batch_size or fmt.NA}, levels "
                 + (", ".join(fmt.level_value(x) for x in s.levels_planned) or fmt.NA)],
        ["Inputs", s.inputs_text],
        ["Cost", f"${s.cost_per_hour:g}/hr" if s.cost_per_hour else "not set (hardware.cost_per_hour)"],
    ]
    if s.server.get("triton_version"):
        rows.append(["Triton", str(s.server["triton_version"])])
    if endpoints := s.server.get("endpoints"):  # the load spread over several servers
        rows.append(["Servers", f"{len(endpoints)}, the load spread evenly: " + "; ".join(map(str, endpoints))])
    if s.mps is not None:
        why = str(s.server.get("mps_why") or "")
        rows.append(["GPU sharing", ("MPS: the model instances share each GPU" if s.mps else
                                     "no MPS: the model instances take turns on each GPU") + (f" ({why})" if why else "")])
    ordered = [k for k in VERSION_KEYS if k in s.versions] + sorted(k for k in s.versions if k not in VERSION_KEYS)
    for key in ordered:
        if s.versions.get(key) and key != "triton":
            rows.append([f"Version: {key}", str(s.versions[key])])
    if s.host:
        rows.append(["Host", _host_text(s.host)])
    if sources := s.metadata.get("merged_from"):  # gpuscale-tui merge: one plan on several load hosts
        rows.append(["Load hosts", _merged_text(sources)])
    if (path := s.network_path()) is not None:
        rows.append(["Network", network_text(path)])
    names = sorted({g.name for g in s.gpus if g.name})
    if names:
        rows.append(["GPUs seen", f"{len(s.gpus)}x " + " / ".join(names)])
    if s.topology and s.topology.summary:
        rows.append(["Topology", s.topology.summary])
    return [Heading("Setup"), Table(["Item", "Value"], rows, left=2)]


def network_text(path: NetworkPath) -> str:
    """"client 42 ms from the server (round trip: ...)", with how it was measured."""
    how = {"health probe": "time to the first byte of /v2/health/ready on a fresh connection",
           "tcp_info": "the kernel's TCP_INFO estimate, to the next TCP endpoint only",
           "connect time": "the TCP connect time, to the next TCP endpoint only"}.get(path.rtt_method, path.rtt_method)
    text = f"client {fmt.ms(path.rtt)} ms from the server (round trip: {how})"
    if path.connect_p50 is not None:
        text += (f"; TCP connect p50 {fmt.ms(path.connect_p50)} ms, max {fmt.ms(path.connect_max)} ms over "
                 f"{path.connections} connections")
    return text


def _box_check(s: RecordingSummary) -> list:
    """The box check at the session's start: was the box what it was listed as?"""
    check = s.box_check
    if check is None:
        return []
    rows = [[i.status, i.scope, i.name, i.measured or fmt.NA, i.expected or fmt.NA, i.note if i.status != "ok" else ""]
            for i in sorted(check.items, key=lambda i: {"fail": 0, "warn": 1, "n/a": 2}.get(i.status, 3))]
    taken = f"{check.reused}, in {check.duration_s:.0f} s" if check.reused else f"in {check.duration_s:.0f} s"
    when = f"{check.reused}; not repeated for this config" if check.reused else "run at the start of the session"
    return [Heading("Box check"), Para(f"{check.summary} ({taken})"),
            Table(["Status", "Where", "Check", "Measured", "Expected", "Note"], rows,
                  f"gpuscale-tui check, {when}", left=6)]


def _merged_text(sources: object) -> str:
    """"2, merged: a (a.sqlite), b (b.sqlite, began 0.12 s later)"."""
    items = [x for x in sources if isinstance(x, dict)] if isinstance(sources, list) else []
    parts = []
    for x in items:
        offset = x.get("offset_s")
        later = f", began {offset:.2f} s later" if isinstance(offset, (int, float)) and offset > 0 else ""
        parts.append(f"{x.get('hostname')} ({x.get('file')}{later})")
    return f"{len(items)}, merged (levels are their sum): " + "; ".join(parts)


def _host_text(host: dict) -> str:
    parts = []
    for key, value in host.items():
        if key.endswith("_bytes") and isinstance(value, (int, float)):
            parts.append(f"{key[:-6].replace('_', ' ')} {fmt.gib(value)} GiB")
        else:
            parts.append(f"{key.replace('_', ' ')} {value}")
    return ", ".join(parts)


def _levels(f: RunFindings, tag: str = "") -> list:
    s = f.summary
    unit = mode_of(s.load_mode).heading
    figures = [
        figure
        for lv in f.levels
        for figure in (dataclasses.replace(columns.LevelFigures.of(
            lv.result, gpu_util=lv.gpu_util_mean,
            cost_per_1000=cost_per_1000(s.cost_per_hour, lv.result.throughput_ips)
            if s.cost_per_hour and lv.result.throughput_ips > 0 else None),
            cost_per_million_tokens=cost_per_million_tokens(s.cost_per_hour or 0.0, lv.result.stream.output_tokens_per_s)
            if lv.result.stream else None),
            *columns.endpoint_figures(lv.result))  # several servers: a row each under the level
    ]
    blocks: list = [Heading("Throughput and latency per level" + tag)]
    if not figures:
        return blocks + [Para("No level produced a result.")]
    shown = columns.without_cost(columns.SWEEP_REPORT, s.cost_per_hour)
    if any(lv.result.stream is not None for lv in f.levels):  # a streaming sweep: TTFT, ITL, tokens/s
        shown = columns.with_stream(shown, priced=(s.cost_per_hour or 0) > 0)
    if any(lv.result.sequence is not None for lv in f.levels):  # a sequence model: first and later steps
        shown = columns.with_sequence(shown)
        if (batcher := sequence_config(s.model_config)) is not None:
            blocks.append(Para(batcher_line(batcher)))
    cached = [lv.result.cache for lv in f.levels if lv.result.cache is not None]
    if cached:  # the LLM server's own cache (its /metrics), and how warm it was at each level's start
        shown = columns.with_cache(shown)
    blocks.append(Table.of(shown, figures))
    if cached:
        blocks.append(Para(f"Prefix hit: the server's cached prompt tokens over its prompt tokens ({cached[0].server}'s "
                           f"/metrics, deltas over each level's merged windows); {columns.CACHE_STATE_NOTE}."))
    pts = f.points
    served = svg.Series("images/s", [(p.level, p.throughput) for p in pts])
    if f.streaming:  # a streaming model's throughput is its output tokens
        served = svg.Series("tokens/s", stream_points([lv.result for lv in f.levels]))
    blocks.append(Chart(svg.line_chart("Throughput vs load", [served], unit, served.name,
                                       log2_x=mode_of(s.load_mode).log2_axis), "Throughput at each level"))
    blocks.append(Chart(svg.line_chart(
        "Latency percentiles",
        [svg.Series(name, [(p.level, getattr(p, key) * 1000) for p in pts if getattr(p, key) is not None])
         for name, key in (("p50", "p50"), ("p95", "p95"), ("p99", "p99"))],
        unit, "latency (ms)", log2_x=mode_of(s.load_mode).log2_axis), "Client latency percentiles at each level"))
    blocks.append(knee_chart("Latency vs throughput (the knee)", [("", pts)]))
    return blocks


def knee_chart(title: str, curves: list[tuple[str, list]], slo: tuple[str, float] | None = None) -> Chart:
    """p50 and p99 against throughput, one point per level in level order, on a log latency axis;
    an open marker is an unsound (unstable) level; ``slo``: (its name, its target in seconds), the
    dashed line. ``curves``: (config name, its SweepPoints); one config's name may be ""."""
    series = []
    for i, (name, pts) in enumerate(curves):
        for key, dashed in (("p50", True), ("p99", False)):
            kept = [p for p in pts if getattr(p, key) is not None]
            series.append(svg.Series(f"{name} {key}".strip(), [(p.throughput, getattr(p, key) * 1000) for p in kept],
                                     dashed=dashed, hollow=[p.status != "stable" for p in kept],
                                     color=svg.PALETTE[i % len(svg.PALETTE)] if len(curves) > 1 else None))
    rules = [svg.Rule(slo[1] * 1000, f"target {slo[0]}", color="#d62728")] if slo else []
    caption = (("One color per config, p50 dashed and p99 solid. " if len(curves) > 1 else "")
               + "Each point is a level, in level order: where p99 turns up while throughput stops growing is the knee. "
               "Latency on a log scale; an open marker is an unstable level (not sound for a decision)"
               + ("; dashed red: the latency target" if slo else ""))
    return Chart(svg.line_chart(title, series, "throughput (images/s)", "latency (ms, log)", log_y=True, rules=rules,
                                continuous_x=True),
                 caption)


def _seconds(v: float) -> str:
    return f"{v:.0f}"


def _over_time(t: Timelines, s: RecordingSummary) -> list:
    """Windows' throughput and latency on a time axis, with a dotted line where each level began."""
    if not t.windows:
        return []
    rules = [svg.Rule(b.t, b.label, vertical=True) for b in t.boundaries]
    measured = [w for w in t.windows if not w.warmup]
    how = (f"averaged into {len(t.windows)} time buckets (p99: the highest of each)" if t.bucketed
           else "one point per window")
    return [
        Heading("Over time"),
        Chart(svg.line_chart("Throughput per window", [svg.Series("images/s", [(w.t, w.throughput_ips) for w in measured]),
                                                       svg.Series("warmup", [(w.t, w.throughput_ips) for w in t.windows
                                                                             if w.warmup], markers_only=True)],
                             "seconds from start", "images/s", rules=rules, x_format=_seconds, continuous_x=True),
              f"Measured windows ({how}); dotted lines: a level begins, labelled with its "
              f"{mode_of(s.load_mode).name}"),
        Chart(svg.line_chart("Latency per window", [
            svg.Series("p50", [(w.t, w.p50 * 1000) for w in measured if w.p50 is not None], dashed=True),
            svg.Series("p99", [(w.t, w.p99 * 1000) for w in measured if w.p99 is not None])],
            "seconds from start", "latency (ms, log)", log_y=True, rules=rules, x_format=_seconds, continuous_x=True),
            "Client latency of the measured windows, log scale; dotted lines: level boundaries"),
    ]


def _breakdown(f: RunFindings, tag: str = "") -> list:
    rows, cats, queue, compute, outside = [], [], [], [], []
    # a level, then (several servers) each endpoint's share of it
    parts = [part for lv in f.levels for part in [(fmt.level_value(lv.level), lv.result.server),
             *((f"{fmt.level_value(lv.level)} {ep.name}", ep.server) for ep in lv.result.endpoints)]]
    for label, sv in parts:
        if sv is None:
            continue
        comp = None
        if None not in (sv.compute_input, sv.compute_infer, sv.compute_output):
            comp = sv.compute_input + sv.compute_infer + sv.compute_output  # type: ignore[operator]  # all three are set when server stats are
        share = sv.queue / (sv.queue + comp) if sv.queue is not None and comp and (sv.queue + comp) > 0 else None
        rows.append([label, fmt.ms(sv.queue), fmt.ms(sv.compute_input), fmt.ms(sv.compute_infer),
                     fmt.ms(sv.compute_output), fmt.ms(sv.server_total), fmt.ms(sv.client_minus_server),
                     fmt.percent(share), fmt.batch(sv.avg_batch_size)])
        cats.append(label)
        queue.append(sv.queue * 1000 if sv.queue is not None else None)
        compute.append(comp * 1000 if comp is not None else None)
        outside.append(sv.client_minus_server * 1000 if sv.client_minus_server is not None else None)
    blocks: list = [Heading("Queue vs compute (server statistics)" + tag)]
    if any(sv is not None and sv.no_split for _, sv in parts):
        return blocks + [Para(f"{DECOUPLED_SPLIT}: Triton's queue and compute statistics time the model's "
                              "execute calls, not a stream of responses; the stream's own figures are its "
                              "latency, TTFT and ITL.")]
    if not rows:
        return blocks + [Para("The server reported no statistics for this run.")]
    blocks.append(Table(["Level", "Queue ms", "Input ms", "Infer ms", "Output ms", "Server ms", "Outside server ms",
                         "Queue share", "Avg batch"], rows,
                        "Per request, from deltas of Triton's statistics; outside server = client latency - server time"))
    blocks.append(Chart(svg.bar_chart("Where a request's time goes", cats,
                                      [("queue", queue), ("compute", compute), ("outside server", outside)],
                                      "ms per request", stacked=True), "Queue vs compute per level"))
    return blocks


def _wire(f: RunFindings, tag: str = "") -> list:
    """The wire check (run --wire): the request path alone, level by level beside the model."""
    wire, found = f.wire, f.wire_assessment
    if wire is None or found is None:
        return []
    model = {float(lv.level): lv.result.throughput_ips for lv in f.levels if lv.result.status != "failed"}
    wire_rows = [columns.WireFigures(wire.mode, w, model.get(w.level)) for w in wire.levels]
    how = transport_spec(wire.transport).inputs_by
    return [
        Heading("The wire's ceiling" + tag),
        Para(f"The same levels against the no-compute {wire.wire_model!r} model, inputs by {how}, batch "
             f"{wire.batch_size}, {wire.request_bytes:,} input bytes per request: what the request path alone "
             f"carries. {found.line[0].upper() + found.line[1:]}."),
        Table.of(columns.WIRE, wire_rows, "; ".join(wire_notes(wire))),
    ]


def _scaling(f: RunFindings) -> list:
    s = f.summary
    n = s.gpus_in_config
    blocks: list = [Heading("Scaling efficiency")]
    if f.peak is not None and n:
        text = (f"Inference: {n} GPU{'s' if n != 1 else ''} in the config, peak {fmt.rate(f.peak.throughput)} images/s "
                f"= {fmt.rate(f.per_gpu_throughput)} per GPU{unstable_mark(f.peak)}. ")
        text += ("This is a 1x run: the base for the others." if n == 1 else
                 "Efficiency needs the 1x run of the same model and config as its base: compare the recordings.")
        blocks.append(Para(text))
    probe = sorted(s.probe, key=lambda p: (p.model, p.strategy != "single", p.scaling, p.per_device_batch, p.world_size))
    if probe:
        blocks.append(Table.of(columns.PROBE, probe, "Training probe"))
        groups: dict[str, list] = {}
        for p in probe:
            groups.setdefault(f"{p.model} {p.scaling} b{p.per_device_batch}", []).append(p)
        blocks.append(Chart(svg.line_chart(
            "Training probe: scaling efficiency", [svg.Series(k, [(p.world_size, (p.efficiency or 0) * 100) for p in v
                                                                  if p.efficiency is not None]) for k, v in groups.items()],
            "GPUs (world size)", "efficiency %"), "Probe efficiency by world size"))
        blocks.append(Chart(svg.line_chart(
            "Training probe: samples/s (95 % CI)",
            [svg.Series(k, [(p.world_size, p.samples_per_s.mean) for p in v],
                        errors=[(p.samples_per_s.ci_low if p.samples_per_s.ci_low is not None else p.samples_per_s.mean,
                                 p.samples_per_s.ci_high if p.samples_per_s.ci_high is not None else p.samples_per_s.mean)
                                for p in v]) for k, v in groups.items()],
            "GPUs (world size)", "samples/s"), "Probe throughput by world size"))
        blocks += _training_bill(s)
    for ar in s.allreduce:
        blocks.append(Table.of(columns.allreduce_columns(ar), columns.allreduce_items(ar), columns.allreduce_title(ar)))
    if len(blocks) == 1:
        blocks.append(Para("No scaling data in this recording."))
    return blocks


def _training_bill(s: RecordingSummary) -> list:
    """Time and $ per epoch at each world size (95 % CI), how it is priced, what to set for what
    is missing, and where to stop adding GPUs."""
    bill = training_bill(s.probe, s.dataset_size, s.cost_per_hour, s.gpu_count)
    blocks: list = [Heading("Training bill", 3)]
    if bill.has_epochs:
        blocks.append(Table.of(columns.bill_columns(bill), bill.rows,
                               f"Time and $ per epoch of {s.dataset_size:,} samples, with the 95 % CI of samples/s "
                               "carried through"))
    notes = [line[0].upper() + line[1:] + "." for line in (bill.pricing, bill.missing) if line]
    blocks += [Para(line) for line in notes]
    blocks.append(Bullets([f"{stop.label}: {stop.stop.reason}." for stop in bill.stops]))
    return blocks


def _no_saturation(f: RunFindings) -> str:
    """Why a sweep has no saturation point: no figures at all, or figures but no sound level."""
    if not f.points:
        return "No level produced a result."
    why = f.answer.not_decided if f.answer is not None else ""
    if why.startswith("no sound level: "):
        return f"No sound level, so no saturation point: {why.removeprefix('no sound level: ')}."
    return "No sound level that measured the server (every sound one was client-bound), so no saturation point."


def _cost(f: RunFindings, tag: str = "") -> list:
    s = f.summary
    if f.cost_per_1000_at_peak is None:
        why = ("hardware.cost_per_hour is not set in the profile" if not s.cost_per_hour
               else "no sound level, so no peak to price" if f.points else "no level produced a result")
        return [Heading("Cost per 1000 images" + tag), Para(f"Not available: {why}.")]
    return [Heading("Cost per 1000 images" + tag), Para(
        f"{fmt.money(f.cost_per_1000_at_peak)} per 1000 images at the peak ({fmt.rate(f.peak.throughput if f.peak else None)} "
        f"images/s, ${s.cost_per_hour:g}/hr{unstable_mark(f.peak, inside=True)}): $/hr / (images/s x 3600) x 1000. Per level in the table above.")]


def _gpu_charts(t: Timelines) -> list:
    """Each GPU's utilization, power and memory on the time axis, one line per GPU."""
    rules = [svg.Rule(b.t, b.label, vertical=True) for b in t.boundaries]
    out = []
    for title, attr, unit, scale in (("GPU utilization over time", "util", "utilization %", 1.0),
                                     ("GPU power over time", "power", "watts", 1.0),
                                     ("GPU memory used over time", "mem", "GiB", 1 / 2**30)):
        series = [svg.Series(g.label, [(x, v * scale) for x, v in getattr(g, attr)]) for g in t.gpus]
        if any(s.points for s in series):
            out.append(Chart(svg.line_chart(title, series, "seconds from start", unit, rules=rules, x_format=_seconds, continuous_x=True),
                             f"Each GPU in {max(len(s.points) for s in series)} time buckets (utilization and power: "
                             "the mean of each, memory: the highest); dotted lines: level boundaries"))
    return out


def _telemetry(f: RunFindings, timelines: Timelines | None = None) -> list:
    s = f.summary
    blocks: list = [Heading("GPU and host telemetry")]
    if s.gpus:
        rows = [[str(g.index) if g.index is not None else fmt.NA, g.name or fmt.NA, g.uuid[:16],
                 *(cell(g.stats) for _heading, cell in REPORT_COLUMNS), g.source]
                for g in s.gpus]
        blocks.append(Table(["GPU", "Name", "UUID", *(heading for heading, _cell in REPORT_COLUMNS), "Source"], rows,
                            "Over the whole session", left=3))
        if timelines is not None and timelines.gpus:
            blocks += _gpu_charts(timelines)
        else:
            series = [svg.Series(f"GPU {g.index if g.index is not None else g.uuid[:8]}",
                                 [(t, u[g.uuid]) for t, u in s.gpu_timeline if g.uuid in u]) for g in s.gpus]
            blocks.append(Chart(svg.line_chart("GPU utilization over time", series, "seconds from start", "utilization %",
                                               x_format=lambda v: f"{v:.0f}"), "GPU utilization (averaged to at most "
                                f"{len(s.gpu_timeline)} points)"))
    else:
        blocks.append(Para("No GPU telemetry in this recording (CPU run, or no NVML / metrics endpoint)."))
    if s.host_cpu_mean is not None:
        blocks.append(Para(f"Host CPU: mean {s.host_cpu_mean:.0f} %, max {s.host_cpu_max:.0f} %."))
    return blocks
