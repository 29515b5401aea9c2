"""`gpuscale-tui`: the command line.

Only argparse and the profile schema are imported to parse flags, so --help is instant; torch,
textual and the engines load only for the command that needs them. Every bad input ends as one
line on stderr and exit code 2; a failed run exits 1, failed gates 3, an interrupted run 130.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from engine.errors import RunFailed, UserError

PROG = "gpuscale-tui"
MIN_PYTHON = (3, 11)  # engine/profiles reads TOML with tomllib; keep in step with pyproject's requires-python


EXIT_CODES = """\
exit codes:
  0    ok
  1    the run failed (a level failed or the sweep ended early, the server or a load worker
       died, the recording could not be written)
  2    bad input (profile, URL, model name, recording file, flag)
  3    a gate failed (gates.* in the profile, or compare's --min-*/--max-* flags)
  130  interrupted (Ctrl-C, SIGTERM, SIGHUP)"""


def _server_variant(text: str) -> str:
    """auto, Nx (1x, 2x, ...), cpu or cpuK (cpu2): whether the model has it is checked when it starts."""
    name = text.strip().lower()
    if not re.fullmatch(r"auto|[1-9]\d*x|cpu(?:[1-9]\d*)?", name):
        raise argparse.ArgumentTypeError(f"unknown variant {text!r} (expected auto, Nx such as 2x, cpu or cpuK such as cpu2)")
    return name


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpuscale-tui")
    except PackageNotFoundError:
        return "unknown (not installed: a source checkout)"


class VersionAction(argparse.Action):
    """--version, read from the installed package's metadata only when asked for."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        print(f"{PROG} {tool_version()}")  # stdout, as argparse's own version action does
        parser.exit(0)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, found {text!r}") from None
    if not math.isfinite(value) or value <= 0:  # nan passes "<= 0": a gate that can never fail
        raise argparse.ArgumentTypeError(f"expected a number > 0, found {text!r}")
    return value


def _add_endpoint_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", dest="urls", action="append", default=[], metavar="URL",
                   help="a remote Triton's HTTP URL (server.url); give it once per server to spread the load over "
                        "several (server.urls)")
    p.add_argument("--metrics-url", dest="metrics_urls", action="append", default=[], metavar="URL",
                   help="its /metrics URL, in the order of --url (server.metrics_url / server.metrics_urls)")
    p.add_argument("--allow-mixed", action="store_true",
                   help="several servers whose model configs differ: measure them together anyway")


def _endpoint_overrides(args: argparse.Namespace) -> list[str]:
    """--url, --metrics-url and --allow-mixed as profile overrides (the command line's servers
    replace the profile's)."""
    import json

    urls, metrics = getattr(args, "urls", []), getattr(args, "metrics_urls", [])
    out = []
    if urls:
        out += ["server.kind=remote", f"server.url={json.dumps(urls[0])}" if len(urls) == 1
                else f"server.urls={json.dumps(urls)}"]
    if metrics:
        out.append(f"server.metrics_url={json.dumps(metrics[0])}" if len(metrics) == 1 and len(urls) <= 1
                   else f"server.metrics_urls={json.dumps(metrics)}")
    if getattr(args, "allow_mixed", False):
        out.append("server.allow_mixed=true")
    return out


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", "-p", default="local", metavar="NAME|PATH",
                   help="a bundled profile (see `gpuscale-tui profiles`) or a path to a .toml file (default: local)")
    p.add_argument("--record", action="store_true",
                   help="headless: no TUI, Rich progress lines (for nohup/tmux/CI); the session is recorded")
    p.add_argument("--headless", action="store_true", help="same as --record")
    p.add_argument("--probe", action="store_true", help="also run the training probe after the sweep")
    p.add_argument("--probe-only", action="store_true", help="run the training probe only (no Triton sweep)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a profile value, e.g. --set load.concurrency=1,8,32 --set load.window_ms=2000")
    p.add_argument("--output", "-o", type=Path, default=Path("recordings"), metavar="DIR",
                   help="folder for the recording (default: recordings/)")
    p.add_argument("--no-record", action="store_true", help="do not write a recording")
    p.add_argument("--no-check", action="store_true", help="skip the box check at the start (see `gpuscale-tui check`)")
    p.add_argument("--input-data", default=None, metavar="PATH",
                   help="send real inputs: a perf_analyzer --input-data JSON file or folder (load.input_data)")
    p.add_argument("--wire", action="store_true",
                   help="after the sweep, measure the request path alone: the same levels against the no-compute "
                        "`wire` model with this model's bytes per request (load.wire_check = true)")
    _add_endpoint_flags(p)


def _add_study_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", "-p", default="local", metavar="NAME|PATH", help="as for run (default: local)")
    p.add_argument("--variants", default=None, metavar="LIST",
                   help="config variants in turn, e.g. 1x,2x,4x (default: every GPU variant that fits this "
                        "machine, or on a machine without GPUs the CPU variants cpu,cpu2); 1x*4 is 4 embedded "
                        "servers of the 1x config, one per GPU (cpu*2: 2 servers of the cpu config)")
    p.add_argument("--slo", default=None, metavar="PCT=TARGET",
                   help="latency target, e.g. p99=50ms (p50, p95, p99): after the planned levels, bisect for "
                        "the highest level that meets it")
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
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a profile value, as for run")
    p.add_argument("--input-data", default=None, metavar="PATH",
                   help="send real inputs: a perf_analyzer --input-data JSON file or folder (load.input_data)")
    p.add_argument("--output", "-o", type=Path, default=Path("recordings"), metavar="DIR",
                   help="folder for the recordings, the study index and its reports (default: recordings/)")
    p.add_argument("--record", "--headless", dest="headless", action="store_true",
                   help="no TUI: progress lines with the time left for the whole study")
    _add_endpoint_flags(p)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Measure how Triton inference and torch training scale across GPUs, live in the terminal. "
        "With no arguments: an embedded Triton server on this machine, the `local` profile, the TUI.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction)
    _add_run_flags(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)

    p = sub.add_parser("run", help="run a session (the default command)", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_run_flags(p)

    p = sub.add_parser("check", help="is this box fit for the run? PCIe links, power, throttling, other tenants, "
                                     "P2P/NVLink, bandwidth, host, the profile's [hardware]; exit 3 on a fail")
    p.add_argument("--profile", "-p", default="local", metavar="NAME|PATH",
                   help="compare the box with this profile's [hardware] block (default: local, declares none)")
    p.add_argument("--json", action="store_true", help="print the verdicts and the measured facts as JSON")
    p.add_argument("--quick", action="store_true", help="NVML and host readings only: no load, bandwidth or all-reduce")
    p.add_argument("--no-allreduce", action="store_true", help="skip the NCCL all-reduce")
    p.add_argument("--output", "-o", type=Path, default=Path("recordings"), metavar="DIR",
                   help="where recordings will go: its free disk is checked (default: recordings/)")
    p = sub.add_parser("study", help="the whole scaling study: the same sweep on each config variant (1x, 2x, 4x ...), "
                       "the latency-target point, energy per image, and how many GPUs are worth paying for")
    _add_study_flags(p)

    p = sub.add_parser("profiles", help="list the bundled profiles, one line each")
    p.add_argument("--check", metavar="PATH", help="validate a profile file and exit")

    p = sub.add_parser("replay", help="show a recording in the TUI (play, pause, speed, seek)")
    p.add_argument("file", type=Path, help="a recording (.sqlite), e.g. recordings/cpu_0gpu_local_<time>.sqlite")
    p.add_argument("--speed", type=_positive_float, default=1.0, help="start speed (1, 2, 10, ...)")
    p.add_argument("--headless", action="store_true", help="print the recording's events as the headless mode does")

    p = sub.add_parser("export", help="export a recording: json, csv (perf_analyzer columns), md, html")
    p.add_argument("file", type=Path, help="a recording (.sqlite)")
    from engine.record.exporters import (
        EXPORTERS,  # here, not at import: main() checks the Python first
    )

    p.add_argument("--format", "-f", choices=tuple(EXPORTERS), action="append", required=True,
                   help="json, csv, md or html; repeat for several")
    p.add_argument("--out", type=Path, default=None, metavar="DIR", help="output folder (default: beside the file)")

    p = sub.add_parser("compare", help="compare recordings side by side (1x vs 2x vs 4x, RTX 4080 vs A100)",
                       epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", type=Path, nargs="+", metavar="FILE",
                   help="two or more recordings (.sqlite); the 1x run of a GPU model is the base for scaling")
    p.add_argument("--format", "-f", choices=("text", "md", "html"), default="text")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="write the report to this new file (never over an existing one)")
    p.add_argument("--min-efficiency", type=_positive_float, default=None, help="gate: fail below this scaling efficiency")
    p.add_argument("--min-throughput", type=_positive_float, default=None, help="gate: fail below this many inferences/s")
    p.add_argument("--max-p99", action="append", default=[], metavar="LEVEL=MS", help="gate: p99 limit at a level")
    p.add_argument("--cost", action="append", default=[], metavar="GPUS=DOLLARS",
                   help="$/hr of a box with this many GPUs, e.g. --cost 1=3.5 --cost 4=14 (runs made on one big "
                        "box standing for smaller ones); replaces the profiles' cost_per_hour")
    p.add_argument("--scale-out-profile", default=None, metavar="NAME|PATH",
                   help="a one-GPU profile whose hardware.cost_per_hour prices each box of a scale-out run (1x*N); "
                        "--cost 1=DOLLARS wins")

    p = sub.add_parser("model", help="model utilities")
    msub = p.add_subparsers(dest="model_command", metavar="ACTION", parser_class=OneLineParser, required=True)
    e = msub.add_parser("export", help="write the ViT-B/32 image encoder as ONNX for Triton's ONNX Runtime backend")
    e.add_argument("--arch", default="openclip_vit_b32", choices=("openclip_vit_b32", "vit_tiny"))
    e.add_argument("--weights", default=None, metavar="PATH", help="OpenCLIP checkpoint (default: random weights)")
    e.add_argument("--out", type=Path, default=Path("model_repository"), metavar="DIR")
    e.add_argument("--opset", type=int, default=17)

    p = sub.add_parser("data", help="input-data files (perf_analyzer's --input-data JSON) for --input-data")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION", parser_class=OneLineParser, required=True)
    d = dsub.add_parser("from-images", help="one entry per photo (JPEG/PNG) of a folder: decoded, resized, "
                                            "centre-cropped and normalised as OpenCLIP's FP32 CHW (needs [data]), "
                                            "or with --raw each file's bytes as a BYTES element")
    d.add_argument("folder", type=Path, metavar="FOLDER", help="a folder of JPEG or PNG photos (file-name order)")
    d.add_argument("--input", required=True, metavar="NAME", help="the model's input the photos go to (e.g. image)")
    d.add_argument("--out", type=Path, required=True, metavar="FILE", help="the JSON file to write")
    d.add_argument("--size", type=int, default=224, metavar="PIXELS", help="side of the square crop (default: 224)")
    d.add_argument("--raw", action="store_true",
                   help="each file's bytes as one BYTES element, for a model that decodes JPEGs itself")

    p = sub.add_parser("server", help="start the embedded Triton server, print its URLs, stop on Ctrl-C "
                                      "(its log is kept in ~/.cache/gpuscale-tui/server-logs)")
    p.add_argument("--model", default="vit_tiny", metavar="NAME",
                   help="a model of model_repository/ (vit_tiny, identity, openclip_vit_b32, ...; default: vit_tiny)")
    p.add_argument("--variant", default="auto", type=_server_variant, metavar="auto|Nx|cpu|cpuK",
                   help="model config: Nx spreads instances over N GPUs, cpuK runs K CPU instances (cpu2); "
                        "auto: every GPU here, or cpu (default: auto)")
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS", help="listen address (default: loopback only)")
    p.add_argument("--http-port", type=int, default=None, metavar="PORT", help="HTTP port (default: a free one)")
    p.add_argument("--mps", default="auto", choices=("auto", "on", "off"),
                   help="on GPUs, run under a private MPS daemon so the model instances share each GPU "
                        "(default: auto, where nvidia-cuda-mps-control is found)")
    return parser


# --------------------------------------------------------------------------- commands


def _cmd_profiles(args: argparse.Namespace) -> int:
    from engine.profiles import bundled_profiles, load_profile

    if args.check:
        profile = load_profile(args.check)
        print(f"{args.check}: ok ({profile.name})")
        return 0
    for path in bundled_profiles():
        p = load_profile(str(path))
        hw = p.hardware
        gpus = f"{hw.gpu_count}x {hw.gpu_model}" if hw.gpu_count else "this machine"
        cost = f"${hw.cost_per_hour:.2f}/h" if hw.cost_per_hour else "-"
        print(f"{p.name:<20} {gpus:<24} {cost:>9}  {p.description}")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    # engine only: the GPU boxes this runs on have no textual
    from engine.check.render import render_text, to_json
    from engine.check.run import expected_from_profile, run_check
    from engine.profiles import load_profile

    profile = load_profile(args.profile)
    progress = (lambda text: None) if args.json else (lambda text: print(f"check: {text} ...", file=sys.stderr, flush=True))
    check = run_check(expected_from_profile(profile), args.output, measure=not args.quick,
                      allreduce=not args.no_allreduce, progress=progress)
    print(to_json(check) if args.json else render_text(check))
    return 3 if check.verdict == "no-go" else 0


HARD_STOP_S = 30.0  # after a second Ctrl-C: the longest we still wait for the session to end


class StopSignals:
    """SIGINT, SIGTERM, SIGHUP: ask the session to stop, and count them. The handler never
    raises: a KeyboardInterrupt inside Thread.join leaves the thread looking finished
    (Python 3.11), and the tool would exit 0 while its session still runs."""

    def __init__(self, stop) -> None:  # noqa: ANN001 - any zero-arg callable
        self.stop = stop
        self.count = 0
        self.hurried_at: float | None = None
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._handler)

    def _handler(self, signum: int, _frame: object) -> None:
        self.count += 1
        if self.count == 2:
            import time

            self.hurried_at = time.monotonic()
            try:
                print(f"{PROG}: stopping: the current window ends, then the server stops "
                      f"(at most {HARD_STOP_S:.0f} s)", file=sys.stderr, flush=True)
            except (OSError, ValueError):  # a closed terminal (SIGHUP)
                pass
        self.stop()

    def given_up(self) -> bool:
        import time

        return self.hurried_at is not None and time.monotonic() - self.hurried_at > HARD_STOP_S


def _install_stop_signals(stop) -> StopSignals:  # noqa: ANN001 - any zero-arg callable
    return StopSignals(stop)


def _cmd_run(args: argparse.Namespace) -> int:
    from engine.profiles import load_profile
    from engine.session import Session, SessionOptions

    overrides = [*args.overrides, *(["load.wire_check=true"] if getattr(args, "wire", False) else []),
                 *_endpoint_overrides(args), *_input_data_override(args)]
    profile = load_profile(args.profile, overrides)
    _check_input_data(profile.load.input_data)
    options = SessionOptions(
        sweep=not args.probe_only,
        probe=True if (args.probe or args.probe_only) else None,
        record_dir=None if args.no_record else args.output,
        check=not args.no_check,
    )
    headless = args.record or args.headless or not sys.stdout.isatty()
    if headless:
        return _run_headless(Session(profile, options))
    options.interactive = True
    session = Session(profile, options)
    from tui.app import run_tui

    return run_tui(session, controls=session, title=f"{PROG} · {profile.name}")


def _input_data_override(args: argparse.Namespace) -> list[str]:
    """--input-data PATH as the profile override it stands for (a TOML string: any path)."""
    path = getattr(args, "input_data", None)
    return [f"load.input_data={json.dumps(path)}"] if path else []


def _check_input_data(path: str) -> None:
    """A missing, unreadable or oversized data file is one line now, not after the server starts
    (its contents are checked against the model's metadata before the first level)."""
    if path:
        from engine.load.input_data import check_readable

        check_readable(path)


def _run_headless(session, *, replay: bool = False) -> int:  # noqa: ANN001 - a Session or a ReplaySource
    """``replay``: printing is the whole job, so a printer that failed fails the command."""
    from tui.headless import HeadlessPrinter

    printer = HeadlessPrinter()
    session.bus.subscribe(printer)
    signals = _install_stop_signals(session.stop)
    session.start()
    while not session.join(0.5):
        if signals.given_up():  # the session did not end in time: never report it as done
            session.exit_code = 130
            break
    if replay and printer.failure is not None and session.exit_code == 0:
        session.exit_code = 2
    printer.finish(session.exit_code, getattr(session, "recording_path", None))
    error = getattr(session, "error", None)
    if session.exit_code == 2 and error:
        print(f"{PROG}: error: {_shown(error.splitlines()[0])}", file=sys.stderr)
    elif session.exit_code == 1 and error:
        print(f"{PROG}: failed: {_shown(error.splitlines()[0])}", file=sys.stderr)
    return session.exit_code


def _ask_on_terminal(message: str) -> bool:
    """The study's wait for a person (a remote server without model control)."""
    try:
        input(f"{PROG}: {message} ")
    except EOFError:
        return False
    return True


def _cmd_study(args: argparse.Namespace) -> int:
    from engine.analysis.slo import parse_slo
    from engine.profiles import load_profile
    from engine.study.study_source import StudySource
    from engine.study.variants import parse_variants

    profile = load_profile(args.profile, [*args.overrides, *_endpoint_overrides(args), *_input_data_override(args)])
    _check_input_data(profile.load.input_data)
    slo = parse_slo(args.slo) if args.slo is not None else None
    if not 0 <= args.search_steps <= 20:
        raise UserError(f"--search-steps: expected 0-20, found {args.search_steps}")
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    study = StudySource(profile, parse_variants(args.variants), slo=slo, record_dir=args.output,
                        search_steps=args.search_steps, costs=_parse_costs(args.cost),
                        ask=_ask_on_terminal if terminal else None, scale_out=args.scale_out,
                        scale_out_price=_one_box_price(args.scale_out_profile))
    study.prepare()  # bad input (variants, GPUs, model control) ends here: one line, exit 2
    if args.headless or not terminal or study.server_kind == "remote (manual)":
        return _run_study_headless(study)
    from tui.study_app import run_study_tui

    code = run_study_tui(study, title=f"{PROG} · study {profile.model.name}")
    for line in _study_reports(study, print):
        print(line)
    return code


def _study_reports(study, say) -> list[str]:  # noqa: ANN001 - a StudySource, a print-like callable
    """Markdown and HTML reports beside the index, and the short table for the terminal."""
    from engine.study.figures import study_figures
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
    from engine.record.doc import Table, text_table

    table = next(b for b in doc.blocks if isinstance(b, Table))
    lines = ["", "study result", text_table(table.header, table.rows), "",
             figures.stop.reason[0].upper() + figures.stop.reason[1:] + ".", *[f"report: {p}" for p in paths]]
    return lines


def _run_study_headless(study) -> int:  # noqa: ANN001 - a StudySource
    from tui.study_headless import StudyPrinter

    printer = StudyPrinter()
    study.bus.subscribe(printer)
    _install_stop_signals(study.stop)
    study.start()
    try:
        while not study.join(0.5):
            pass
    except KeyboardInterrupt:
        study.stop()
        study.join(60)
    lines = _study_reports(study, print)
    printer.finish_study(study.exit_code, study.index_path, lines)
    if study.exit_code == 2 and study.error:
        print(f"{PROG}: error: {_shown(study.error.splitlines()[0])}", file=sys.stderr)
    elif study.exit_code != 0 and study.error:
        print(f"{PROG}: {'interrupted' if study.exit_code == 130 else 'failed'}: {_shown(study.error.splitlines()[0])}",
              file=sys.stderr)
    return study.exit_code


REPLAY_IDLE_S = 5.0  # headless replay of a file without an end: a live writer commits every 0.5 s


def _cmd_replay(args: argparse.Namespace) -> int:
    from engine.record.replay_source import ReplaySource
    from engine.study.index import is_index

    if is_index(args.file):
        from engine.study.study_replay import StudyReplaySource

        study = StudyReplaySource(args.file, speed=None if args.headless else args.speed)
        if args.headless:
            from tui.study_headless import StudyPrinter

            printer = StudyPrinter()
            study.bus.subscribe(printer)
            study.start()
            study.join()
            printer.close()  # the lines still queued
            if study.error:
                print(f"{PROG}: error: {_shown(study.error.splitlines()[0])}", file=sys.stderr)
            return study.exit_code
        from tui.study_app import run_study_tui

        run_study_tui(study, title=f"{PROG} · replay {args.file.name}")
        return study.exit_code

    # no terminal to draw on (a pipe, a log file, CI): print the events, as `run` does
    headless = args.headless or not sys.stdout.isatty()
    if headless:
        # all events at once, then end: a crashed file (no end) is followed only while it grows
        return _run_headless(ReplaySource(args.file, speed=None, linger=False, idle_timeout_s=REPLAY_IDLE_S), replay=True)
    source = ReplaySource(args.file, speed=args.speed)
    from tui.app import run_tui

    return run_tui(source, replay=source, title=f"{PROG} · replay {args.file.name}")


def _cmd_export(args: argparse.Namespace) -> int:
    from engine.record.exporters import export
    from engine.record.reader import Recording
    from engine.study.index import is_index

    out_dir = args.out or args.file.parent
    if is_index(args.file):  # a study: one report for all its configs; data per recording
        from engine.study.figures import study_figures
        from engine.study.index import read_index, recording_paths
        from engine.study.study_report import export_study

        for fmt in dict.fromkeys(args.format):
            if fmt in ("md", "html"):
                print(export_study(study_figures(args.file), fmt, out_dir))
            else:
                for _variant, path in recording_paths(read_index(args.file), args.file):
                    print(export(Recording.open(path), fmt, out_dir))
        return 0
    recording = Recording.open(args.file)
    _print_notes([recording])
    for fmt in dict.fromkeys(args.format):
        print(export(recording, fmt, out_dir))
    return 0


def _print_notes(recordings: list) -> None:  # noqa: ANN001 - Recording
    for recording in recordings:
        for note in recording.notes:
            print(f"{PROG}: warning: {note}", file=sys.stderr)


def _one_box_price(name: str | None) -> tuple[float, str] | None:
    """--scale-out-profile: a one-GPU profile's box price, and where it is from."""
    if name is None:
        return None
    from engine.profiles import load_profile

    box = load_profile(name)
    hw = box.hardware
    if hw.gpu_count != 1:
        raise UserError(f"--scale-out-profile {name}: expected a one-GPU profile, found hardware.gpu_count = "
                        f"{hw.gpu_count}")
    if not hw.cost_per_hour:
        raise UserError(f"--scale-out-profile {name}: hardware.cost_per_hour is not set (or use --cost 1=DOLLARS)")
    return hw.cost_per_hour, f"hardware.cost_per_hour of profile {box.name}"


def _parse_costs(items: list[str]) -> dict[int, float]:
    """``4=14`` or ``4gpu:14``: $/hr of a box with that many GPUs."""
    costs: dict[int, float] = {}
    for item in items:
        gpus, sep, dollars = item.partition("=") if "=" in item else item.partition(":")
        try:
            n, price = int(gpus.removesuffix("gpu")), float(dollars)
        except ValueError:
            n, price = 0, 0.0
        if not sep or n <= 0 or price <= 0:
            raise UserError(f"--cost {item!r}: expected GPUS=DOLLARS_PER_HOUR, e.g. 4=14")
        costs[n] = price
    return costs


def _cmd_compare(args: argparse.Namespace) -> int:
    from engine.analysis.gates import (
        describe_gates,
        evaluate_comparison_gates,
        merge_gates,
        parse_p99_gates,
    )
    from engine.profiles import Gates

    gates = merge_gates(Gates(), min_throughput=args.min_throughput, max_p99_ms=parse_p99_gates(args.max_p99),
                        min_efficiency=args.min_efficiency)
    from engine.record.compare import compare, render_compare
    from engine.record.exporters import export_compare
    from engine.record.reader import Recording

    costs = _parse_costs(args.cost)
    if args.out is not None and (args.out.exists() or args.out.is_symlink()):  # --out names a new file
        what = "a folder; --out takes the name of a new file" if args.out.is_dir() else "not overwriting it"
        raise UserError(f"--out {args.out}: already exists ({what})")
    from engine.study.index import is_index, read_index, recording_paths

    files: list[Path] = []
    one_box = _one_box_price(args.scale_out_profile)
    study = False  # a study prices each config as its share of the box: so does its comparison
    for path in args.files:  # a study index stands for its finished variants' recordings
        if is_index(path):
            index = read_index(path)
            files += [p for v, p in recording_paths(index, path) if v in index.finished]
            study = True
            for gpus, dollars in index.costs.items():  # the study's own --cost, unless given again
                costs.setdefault(int(gpus), float(dollars))
            if one_box is None and index.scale_out_price:  # the study's own --scale-out-profile
                one_box = (index.scale_out_price, index.scale_out_price_from)
        else:
            files.append(path)
    recordings = [Recording.open(path) for path in files]
    _print_notes(recordings)
    verdict = None
    if study and len(args.files) == 1:  # one study alone: its own verdict, so that both reports say the same
        from engine.study.figures import study_figures

        verdict = study_figures(args.files[0], costs).stop.reason
    comparison = compare(recordings, costs, pro_rata=study, study_verdict=verdict, scale_out_price=one_box)
    failures = evaluate_comparison_gates(gates, comparison)
    comparison.gates, comparison.gate_failures = describe_gates(gates), failures  # in the report too
    if args.out:
        print(export_compare(comparison, args.format, args.out.parent, args.out.name))
    else:
        from engine.record.safe_text import terminal_text

        text = render_compare(comparison, args.format)
        print(terminal_text(text) if args.format == "text" else text)
    from engine.analysis.gates import gate_exit_code, gate_word

    for failure in failures:
        print(f"{gate_word(failure)}: {failure}", file=sys.stderr)
    return gate_exit_code(failures)


def _cmd_model(args: argparse.Namespace) -> int:
    from engine.server.onnx_export import export_onnx

    path = export_onnx(args.arch, args.out, weights=args.weights, opset=args.opset, model_name=args.arch)
    note = "OpenCLIP weights" if args.weights else "random weights (throughput does not depend on weight values)"
    print(f"{path} ({note})")
    return 0


def _cmd_data(args: argparse.Namespace) -> int:
    from engine.load.input_images import images_document

    document = images_document(args.folder, args.input, size=args.size, raw=args.raw)
    text = json.dumps(document, separators=(",", ":"))
    partial = args.out.with_name(f".{args.out.name}.partial")
    try:
        partial.write_text(text)
        partial.replace(args.out)
    finally:
        partial.unlink(missing_ok=True)
    what = "raw bytes (BYTES)" if args.raw else f"FP32 [3, {args.size}, {args.size}], OpenCLIP-normalised"
    print(f"{args.out}: {len(document['data'])} entries for input {args.input!r}, {what}")
    return 0


def _cmd_server(args: argparse.Namespace) -> int:
    import threading

    from engine.profiles import check_bind_address
    from engine.server.embedded import EmbeddedServer

    check_bind_address(args.bind)
    if args.http_port is not None and not 0 < args.http_port < 65536:
        raise UserError(f"--http-port: expected 1-65535, found {args.http_port}")
    import os
    import time

    # the log outside the server's work folder, which goes when it stops: the printed path stays true
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    log_dir = cache / "gpuscale-tui" / "server-logs" / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    server = EmbeddedServer(model=args.model, variant=args.variant, bind_address=args.bind, http_port=args.http_port,
                            mps=args.mps, log_dir=log_dir)
    done = threading.Event()
    signals = _install_stop_signals(done.set)
    print(f"starting embedded Triton ({args.model}, variant {args.variant}) ...", flush=True)
    with server:
        print(f"HTTP     {server.http_url}\ngRPC     {server.grpc_url}\nmetrics  {server.metrics_url}")
        print(f"model    {args.model} (variant {server.variant})\nlog      {server.log_path} (kept after it stops)")
        if server.prepared and server.prepared.gpus:
            print(f"MPS      {'on' if server.mps_used else 'off'}: {server.mps_why}")
        print("Ctrl-C stops the server.", flush=True)
        while not done.wait(0.5):
            if not server.alive():
                raise RunFailed(f"tritonserver exited ({server.exit_reason()}); log: {server.log_path}")
    print(f"server stopped; its log: {server.log_path}")
    return 130 if signals.count else 0  # stopped by Ctrl-C, SIGTERM or SIGHUP: interrupted


COMMANDS = {
    None: _cmd_run,
    "run": _cmd_run,
    "check": _cmd_check,
    "study": _cmd_study,
    "profiles": _cmd_profiles,
    "replay": _cmd_replay,
    "export": _cmd_export,
    "compare": _cmd_compare,
    "model": _cmd_model,
    "data": _cmd_data,
    "server": _cmd_server,
}


def _shown(exc: BaseException | str) -> str:
    """An error for the screen: credentials in URLs or header-like text masked."""
    from engine.record.redact import Redactor
    from engine.record.safe_text import terminal_text

    return terminal_text(Redactor().text(str(exc)), keep_newlines=False)


def _interrupt_on_term() -> None:
    """SIGTERM and SIGHUP end a command as Ctrl-C does: its half-written file removed, exit 130."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    if sys.version_info < MIN_PYTHON:  # a source checkout run by an older Python: one line, not an ImportError
        found = ".".join(map(str, sys.version_info[:3]))
        print(f"{PROG}: error: needs Python {'.'.join(map(str, MIN_PYTHON))} or newer (this is {found})", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    if args.command in ("export", "compare", "profiles", "model", "data"):
        _interrupt_on_term()  # run, study and server install their own stop signals
    try:
        return COMMANDS[args.command](args)
    except UserError as exc:
        print(f"{PROG}: error: {_shown(exc)}", file=sys.stderr)
        return exc.exit_code
    except RunFailed as exc:
        print(f"{PROG}: failed: {_shown(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a path the user gave: too long a name, a full disk, no permission
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"{PROG}: error: {where}{exc.strerror or _shown(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
