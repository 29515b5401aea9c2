"""`gpuscale-tui study`: the same sweep on each config variant, the latency-target point, and how
many GPUs are worth paying for; in the study TUI or headless, then its reports."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from engine.errors import UserError, require_extra
from tui.commands.exits import PROG, shown
from tui.commands.flags import (
    add_endpoint_flags,
    check_input_data,
    endpoint_overrides,
    input_data_override,
    one_box_price,
    parse_costs,
    slo_override,
)
from tui.commands.stop_signals import StopSignals
from tui.metrics_flags import add_metrics_flags, metrics_endpoint

STREAM_OBJECTIVE = re.compile(r"^\s*(ttft|itl|latency|e2e)_p")  # a streaming model's objectives, not a latency target
E2E = re.compile(r"\be2e_p")  # e2e_p99 (the LLM tools' word) is load.slo's latency_p99


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("study", help="the whole scaling study: the same sweep on each config variant (1x, 2x, 4x ...), "
                       "the latency-target point, energy per image, and how many GPUs are worth paying for")
    p.add_argument("--profile", "-p", default="local", metavar="NAME|PATH", help="as for run (default: local)")
    p.add_argument("--variants", default=None, metavar="LIST",
                   help="config variants in turn, e.g. 1x,2x,4x (default: every GPU variant that fits this "
                        "machine, or on a machine without GPUs the CPU variants cpu,cpu2); 1x*4 is 4 embedded "
                        "servers of the 1x config, one per GPU (cpu*2: 2 servers of the cpu config)")
    p.add_argument("--slo", default=None, metavar="PCT=TARGET",
                   help="latency target, e.g. p99=50ms (p50, p95, p99): after the planned levels, bisect for "
                        "the highest level that meets it; for a streaming model, objectives such as "
                        "ttft_p99=200ms,itl_p99=50ms (load.slo): each config's answer at their goodput")
    p.add_argument("--search-steps", type=int, default=4, metavar="N",
                   help="at most this many extra levels per config for the --slo search (default: 4)")
    p.add_argument("--cost", action="append", default=[], metavar="GPUS=DOLLARS",
                   help="$/hr of a box with this many GPUs (default: the profile's box price, pro rata per GPU); "
                        "--cost 1=DOLLARS also prices the scale-out config's one-GPU boxes")
    p.add_argument("--scale-out", action="store_true",
                   help="also run 1x*N (N embedded servers of one GPU each, N = the largest variant's GPUs; "
                        "cpu*2 without GPUs) and answer: scale out or scale up, by $ per 1000 images")
    p.add_argument("--scale-out-profile", default=None, metavar="NAME|PATH",
                   help="a one-GPU profile whose hardware.cost_per_hour prices each box of the scale-out "
                        "config (e.g. 1x_rtx4080; --cost 1=DOLLARS wins)")
    p.add_argument("--serve", default=None, metavar="COMMAND",
                   help="the LLM serving study: start this OpenAI-compatible server per config and measure it, "
                        "e.g. 'vllm serve MODEL --port {port} --tensor-parallel-size {tp}' ({port} required; {tp}: "
                        "the config's tensor-parallel size; {gpus}: its GPUs, also CUDA_VISIBLE_DEVICES); configs "
                        "tp1, tpN and 1*N (N replicas of tp1, the load spread over them) unless --variants names them")
    p.add_argument("--gpus", dest="serve_units", type=int, default=None, metavar="N",
                   help="with --serve: N for the default configs tp1, tpN, 1*N (default: the GPUs present, 2 without)")
    p.add_argument("--serve-start-budget", type=float, default=None, metavar="SECONDS",
                   help="with --serve: how long each server may take to answer /health and /v1/models "
                        "(default: 900)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a profile value, as for run")
    p.add_argument("--input-data", default=None, metavar="PATH",
                   help="send real inputs: a perf_analyzer --input-data JSON file or folder (load.input_data)")
    p.add_argument("--output", "-o", type=Path, default=Path("recordings"), metavar="DIR",
                   help="folder for the recordings, the study index and its reports (default: recordings/)")
    p.add_argument("--record", "--headless", dest="headless", action="store_true",
                   help="no TUI: progress lines with the time left for the whole study")
    add_endpoint_flags(p)
    add_metrics_flags(p)


# the study's servers are ours, on loopback: each config's URLs replace this one (study_source.py)
SERVE_OVERRIDES = ["load.api=openai", "server.kind=remote", 'server.url="http://127.0.0.1:1/v1"']


def serve_flags(args: argparse.Namespace):  # noqa: ANN201 - a Serve, or None without --serve
    """--serve and its flags, checked before anything starts (one line, exit 2)."""
    from engine.server.serve_command import DEFAULT_START_BUDGET_S, check_template
    from engine.study.serve_configs import Serve

    if args.serve is None:
        for flag, value in (("--gpus", args.serve_units), ("--serve-start-budget", args.serve_start_budget)):
            if value is not None:
                raise UserError(f"{flag}: only with --serve")
        return None
    if args.urls:
        raise UserError("--serve starts its own servers: leave out --url")
    budget = DEFAULT_START_BUDGET_S if args.serve_start_budget is None else args.serve_start_budget
    if not 0 < budget <= 86400:
        raise UserError(f"--serve-start-budget: expected seconds in (0, 86400], found {budget:g}")
    if args.serve_units is not None and not 2 <= args.serve_units <= 64:
        raise UserError(f"--gpus: expected 2-64, found {args.serve_units}")
    return Serve(check_template(args.serve), args.serve, budget, args.serve_units)


def ask_on_terminal(message: str) -> bool:
    """The study's wait for a person (a remote server without model control)."""
    try:
        input(f"{PROG}: {message} ")
    except EOFError:
        return False
    return True


def run(args: argparse.Namespace) -> int:
    from engine.analysis.slo import parse_slo
    from engine.profiles import load_profile
    from engine.study.study_source import StudySource
    from engine.study.variants import parse_variants
    from tui.commands.remote import check_url_flags, name_after_server

    check_url_flags(args)
    serve = serve_flags(args)
    if args.slo is not None:
        args.slo = E2E.sub("latency_p", args.slo)
    # a streaming model's objectives (ttft_p99=200ms,itl_p99=50ms) are load.slo: each config's
    # answer is at their goodput; a latency target (p99=50ms) is the study's bisection
    streaming_slo = args.slo is not None and STREAM_OBJECTIVE.match(args.slo) is not None
    profile = name_after_server(load_profile(args.profile, [*args.overrides, *endpoint_overrides(args),
                                                            *input_data_override(args),
                                                            *(slo_override(args) if streaming_slo else []),
                                                            *(SERVE_OVERRIDES if serve else [])]), args)
    check_input_data(profile.load)
    if profile.server.kind == "embedded" and serve is None:  # before the plan, its index and each config's session: one line
        require_extra("server", "the embedded server")
    slo = parse_slo(args.slo) if args.slo is not None and not streaming_slo else None
    if not 0 <= args.search_steps <= 20:
        raise UserError(f"--search-steps: expected 0-20, found {args.search_steps}")
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    study = StudySource(profile, parse_variants(args.variants), slo=slo, record_dir=args.output,
                        search_steps=args.search_steps, costs=parse_costs(args.cost),
                        ask=ask_on_terminal if terminal else None, scale_out=args.scale_out,
                        scale_out_price=one_box_price(args.scale_out_profile), serve=serve)
    study.prepare()  # bad input (variants, GPUs, model control) ends here: one line, exit 2
    with metrics_endpoint(args, PROG) as metrics:
        metrics.watch(study.bus)
        if args.headless or not terminal or study.server_kind == "remote (manual)":
            return run_study_headless(study)
        from tui.study_app import run_study_tui

        code = run_study_tui(study, title=f"{PROG} · study {profile.model.name}")
    for line in study_reports(study, print):
        print(line)
    return code


def study_reports(study, say: Callable[[str], object]) -> list[str]:  # noqa: ANN001 - a StudySource
    """Markdown and HTML reports beside the index, and the short table for the terminal."""
    from engine.study.figures import recommendation, study_figures
    from engine.study.study_report import build_study_doc, export_study

    if study.index_path is None or study.index is None or not study.index.finished:
        return []
    try:
        figures = study_figures(study.index_path)
        paths = [export_study(figures, fmt, study.index_path.parent) for fmt in ("md", "html")]
    except UserError as exc:
        say(f"{PROG}: no study report: {exc}")
        return []
    doc = build_study_doc(figures)
    from engine.columns import text_table
    from engine.record.doc import Table

    table = next(b for b in doc.blocks if isinstance(b, Table))
    lines = ["", "study result", text_table(table.header, table.rows, rule=True), "",
             (recommend := recommendation(figures))[0].upper() + recommend[1:] + ".", *[f"report: {p}" for p in paths]]
    return lines


def run_study_headless(study) -> int:  # noqa: ANN001 - a StudySource
    from tui.study_headless import StudyPrinter

    printer = StudyPrinter()
    study.bus.subscribe(printer)
    StopSignals(study.stop)
    study.start()
    try:
        while not study.join(0.5):
            pass
    except KeyboardInterrupt:
        study.stop()
        study.join(60)
    lines = study_reports(study, print)
    printer.finish_study(study.exit_code, study.index_path, lines)
    if study.exit_code == 2 and study.error:
        print(f"{PROG}: error: {shown(study.error.splitlines()[0])}", file=sys.stderr)
    elif study.exit_code != 0 and study.error:
        print(f"{PROG}: {'interrupted' if study.exit_code == 130 else 'failed'}: {shown(study.error.splitlines()[0])}",
              file=sys.stderr)
    return study.exit_code
