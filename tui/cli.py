"""`gpuscale-tui`: the command line.

Only argparse and the profile schema are imported to parse flags, so --help is instant; torch,
textual and the engines load only for the command that needs them. Every bad input ends as one
line on stderr and exit code 2; a failed run exits 1, failed gates 3, an interrupted run 130.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
from pathlib import Path
from typing import NoReturn, Sequence

from engine.errors import RunFailed, UserError

PROG = "gpuscale-tui"
EXPORT_FORMATS = ("json", "csv", "md", "html")


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, found {text!r}") from None
    if not math.isfinite(value) or value <= 0:  # nan passes "<= 0": a gate that can never fail
        raise argparse.ArgumentTypeError(f"expected a number > 0, found {text!r}")
    return value


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


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Measure how Triton inference and torch training scale across GPUs, live in the terminal. "
        "With no arguments: an embedded Triton server on this machine, the `local` profile, the TUI.",
    )
    _add_run_flags(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)

    p = sub.add_parser("run", help="run a session (the default command)")
    _add_run_flags(p)

    p = sub.add_parser("profiles", help="list the bundled profiles, one line each")
    p.add_argument("--check", metavar="PATH", help="validate a profile file and exit")

    p = sub.add_parser("replay", help="show a recording in the TUI (play, pause, speed, seek)")
    p.add_argument("file", type=Path)
    p.add_argument("--speed", type=_positive_float, default=1.0, help="start speed (1, 2, 10, ...)")
    p.add_argument("--headless", action="store_true", help="print the recording's events as the headless mode does")

    p = sub.add_parser("export", help="export a recording: json, csv (perf_analyzer columns), md, html")
    p.add_argument("file", type=Path)
    p.add_argument("--format", "-f", choices=EXPORT_FORMATS, action="append", required=True)
    p.add_argument("--out", type=Path, default=None, metavar="DIR", help="output folder (default: beside the file)")

    p = sub.add_parser("compare", help="compare recordings side by side (1x vs 2x vs 4x, RTX 4080 vs A100)")
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--format", "-f", choices=("text", "md", "html"), default="text")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="write the report to this new file (never over an existing one)")
    p.add_argument("--min-efficiency", type=_positive_float, default=None, help="gate: fail below this scaling efficiency")
    p.add_argument("--min-throughput", type=_positive_float, default=None, help="gate: fail below this many inferences/s")
    p.add_argument("--max-p99", action="append", default=[], metavar="LEVEL=MS", help="gate: p99 limit at a level")
    p.add_argument("--cost", action="append", default=[], metavar="GPUS=DOLLARS",
                   help="$/hr of a box with this many GPUs, e.g. --cost 1=3.5 --cost 4=14 (runs made on one big "
                        "box standing for smaller ones); replaces the profiles' cost_per_hour")

    p = sub.add_parser("model", help="model utilities")
    msub = p.add_subparsers(dest="model_command", metavar="ACTION", parser_class=OneLineParser, required=True)
    e = msub.add_parser("export", help="write the ViT-B/32 image encoder as ONNX for Triton's ONNX Runtime backend")
    e.add_argument("--arch", default="openclip_vit_b32", choices=("openclip_vit_b32", "vit_tiny"))
    e.add_argument("--weights", default=None, metavar="PATH", help="OpenCLIP checkpoint (default: random weights)")
    e.add_argument("--out", type=Path, default=Path("model_repository"), metavar="DIR")
    e.add_argument("--opset", type=int, default=17)

    p = sub.add_parser("server", help="start the embedded Triton server, print its URLs, stop on Ctrl-C")
    p.add_argument("--model", default="vit_tiny")
    p.add_argument("--variant", default="auto", choices=("auto", "cpu", "1x", "2x", "4x", "8x"))
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS", help="listen address (default: loopback only)")
    p.add_argument("--http-port", type=int, default=None, metavar="PORT", help="HTTP port (default: a free one)")
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

    profile = load_profile(args.profile, args.overrides)
    options = SessionOptions(
        sweep=not args.probe_only,
        probe=True if (args.probe or args.probe_only) else None,
        record_dir=None if args.no_record else args.output,
    )
    headless = args.record or args.headless or not sys.stdout.isatty()
    if headless:
        return _run_headless(Session(profile, options))
    options.interactive = True
    session = Session(profile, options)
    from tui.app import run_tui

    return run_tui(session, controls=session, title=f"{PROG} · {profile.name}")


def _run_headless(session) -> int:  # noqa: ANN001 - a Session or a ReplaySource
    from tui.headless import HeadlessPrinter

    printer = HeadlessPrinter()
    session.bus.subscribe(printer)
    signals = _install_stop_signals(session.stop)
    session.start()
    while not session.join(0.5):
        if signals.given_up():  # the session did not end in time: never report it as done
            session.exit_code = 130
            break
    printer.finish(session.exit_code, getattr(session, "recording_path", None))
    error = getattr(session, "error", None)
    if session.exit_code == 2 and error:
        print(f"{PROG}: error: {error.splitlines()[0]}", file=sys.stderr)
    elif session.exit_code == 1 and error:
        print(f"{PROG}: failed: {error.splitlines()[0]}", file=sys.stderr)
    return session.exit_code


REPLAY_IDLE_S = 5.0  # headless replay of a file without an end: a live writer commits every 0.5 s


def _cmd_replay(args: argparse.Namespace) -> int:
    from engine.record.replay import ReplaySource

    # no terminal to draw on (a pipe, a log file, CI): print the events, as `run` does
    headless = args.headless or not sys.stdout.isatty()
    if headless:
        # all events at once, then end: a crashed file (no end) is followed only while it grows
        return _run_headless(ReplaySource(args.file, speed=None, linger=False, idle_timeout_s=REPLAY_IDLE_S))
    source = ReplaySource(args.file, speed=args.speed)
    from tui.app import run_tui

    return run_tui(source, replay=source, title=f"{PROG} · replay {args.file.name}")


def _cmd_export(args: argparse.Namespace) -> int:
    from engine.record.export import export
    from engine.record.reader import Recording

    recording = Recording.open(args.file)
    _print_notes([recording])
    out_dir = args.out or args.file.parent
    for fmt in dict.fromkeys(args.format):
        print(export(recording, fmt, out_dir))
    return 0


def _print_notes(recordings: list) -> None:  # noqa: ANN001 - Recording
    for recording in recordings:
        for note in recording.notes:
            print(f"{PROG}: warning: {note}", file=sys.stderr)


def _parse_costs(items: list[str]) -> dict[int, float]:
    """``4=14`` or seed 001's ``4gpu:14``: $/hr of a box with that many GPUs."""
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
    from engine.analysis.gates import evaluate_comparison_gates, merge_gates, parse_p99_gates
    from engine.profiles import Gates

    gates = merge_gates(Gates(), min_throughput=args.min_throughput, max_p99_ms=parse_p99_gates(args.max_p99),
                        min_efficiency=args.min_efficiency)
    from engine.record.compare import compare, render_compare
    from engine.record.export import export_compare
    from engine.record.reader import Recording

    costs = _parse_costs(args.cost)
    recordings = [Recording.open(path) for path in args.files]
    _print_notes(recordings)
    comparison = compare(recordings, costs)
    if args.out:
        print(export_compare(comparison, args.format, args.out.parent, args.out.name))
    else:
        print(render_compare(comparison, args.format))
    failures = evaluate_comparison_gates(gates, comparison)
    for failure in failures:
        print(f"gate failed: {failure}", file=sys.stderr)
    return 3 if failures else 0


def _cmd_model(args: argparse.Namespace) -> int:
    from engine.server.export import export_onnx

    path = export_onnx(args.arch, args.out, weights=args.weights, opset=args.opset, model_name=args.arch)
    note = "OpenCLIP weights" if args.weights else "random weights (throughput does not depend on weight values)"
    print(f"{path} ({note})")
    return 0


def _cmd_server(args: argparse.Namespace) -> int:
    import threading

    from engine.profiles import check_bind_address
    from engine.server.embedded import EmbeddedServer

    check_bind_address(args.bind)
    if args.http_port is not None and not 0 < args.http_port < 65536:
        raise UserError(f"--http-port: expected 1-65535, found {args.http_port}")
    server = EmbeddedServer(model=args.model, variant=args.variant, bind_address=args.bind, http_port=args.http_port)
    done = threading.Event()
    _install_stop_signals(done.set)
    print(f"starting embedded Triton ({args.model}, variant {args.variant}) ...", flush=True)
    with server:
        print(f"HTTP     {server.http_url}\ngRPC     {server.grpc_url}\nmetrics  {server.metrics_url}")
        print(f"model    {args.model} (variant {server.variant})\nlog      {server.log_path}")
        print("Ctrl-C stops the server.", flush=True)
        while not done.wait(0.5):
            if not server.alive():
                raise RunFailed(f"tritonserver exited ({server.exit_reason()}); log: {server.log_path}")
    print("server stopped")
    return 0


COMMANDS = {
    None: _cmd_run,
    "run": _cmd_run,
    "profiles": _cmd_profiles,
    "replay": _cmd_replay,
    "export": _cmd_export,
    "compare": _cmd_compare,
    "model": _cmd_model,
    "server": _cmd_server,
}


def _shown(exc: BaseException) -> str:
    """An error for the screen: credentials in URLs or header-like text masked."""
    from engine.record.redact import Redactor

    return Redactor().text(str(exc))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
