"""Does the display perturb the measurement? The same sweep, headless and in the TUI, in one run.

One embedded Triton server is started; every run measures it as a remote server (so server
start-up is not part of any run). Runs alternate in ABBA order (headless, TUI, TUI, headless,
...) so that drift on a shared machine falls on both sides. The TUI runs under a
pseudo-terminal (pty.fork) of --size columns x rows; the bench drains its output (counting the
bytes a terminal would receive), waits for the recording to hold SweepFinished, then quits with
q, y. Results come from the recordings both modes write (engine.record.reader).

Prints per level: median throughput and p99 of each mode (with min-max over repeats) and the
TUI/headless ratios; then the overall ratios (geometric mean over levels) against the targets:
throughput >= 0.97, p99 <= 1.05. Nothing is asserted: this is a measurement.

    python -m bench tui_overhead                      # identity model, 3 pairs
    python -m bench tui_overhead --model vit_tiny --concurrency 1,4,8 --pairs 2
"""

from __future__ import annotations

import argparse
import math
import os
import pty
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fcntl import ioctl
from pathlib import Path

from bench.common import ROOT
from engine.record.reader import Recording
from engine.server.embedded import EmbeddedServer

RUN_TIMEOUT_S = 600.0
QUIT_TIMEOUT_S = 90.0
TARGET_THROUGHPUT = 0.97
TARGET_P99 = 1.05
TARGET_CPU_EXCESS = 0.10  # the TUI's client CPU per request within 10 % of headless


@dataclass
class Run:
    mode: str  # "headless" or "tui"
    index: int
    levels: dict[float, tuple[float, float]] = field(default_factory=dict)  # level -> (infer/s, p99 s)
    statuses: dict[float, str] = field(default_factory=dict)
    wall_s: float = 0.0
    cpu_s: float = 0.0  # the tool's process and its load workers (waited-for children)
    terminal_bytes: int = 0  # what the TUI wrote to its terminal
    requests: int = 0  # every window's requests (warmup included): the divisor of CPU per request
    sweep_cpu_s: float = math.nan  # the process tree's CPU from the first level's start to the sweep's end
    marks: dict[str, float] = field(default_factory=dict)  # "start"/"end": the tree's CPU when first seen


def cli_args(args: argparse.Namespace, server: EmbeddedServer, out_dir: Path) -> list[str]:
    sets = {
        "server.kind": "remote",
        "server.url": server.http_url,
        "server.metrics_url": server.metrics_url,
        "model.name": args.model,
        "load.concurrency": args.concurrency,
        "load.window_ms": str(args.window_ms),
        "load.max_windows": str(args.max_windows),
        "load.warmup_s": str(args.warmup_s),
        "probe.enabled": "false",
    }
    out = [sys.executable, "-m", "tui.cli", "--profile", "local"]
    if args.gpus:  # the same synthetic GPUs in both modes: the display draws them, headless records them
        out[2:3] = ["bench.synthetic_gpus", "--gpus", str(args.gpus), "--hz", f"{args.gpu_hz:g}", "--"]
    for key, value in sets.items():
        out += ["--set", f"{key}={value}"]
    return out + ["-o", str(out_dir)]


def read_results(out_dir: Path, run: Run) -> None:
    (path,) = out_dir.glob("*.sqlite")
    with Recording.open(path) as recording:
        for window in recording.events(("window",)):
            run.requests += window.requests  # type: ignore[attr-defined]  # a WindowResult (kind checked above)
        for event in recording.events(("level_result",)):
            run.levels[event.level] = (event.throughput_ips, event.latency.p99 or math.nan)  # type: ignore[attr-defined]  # a LevelResult (kind checked above)
            run.statuses[event.level] = event.status  # type: ignore[attr-defined]  # a LevelResult


def sweep_stage(out_dir: Path) -> str:
    """How far the recording is: "" (no level started yet), "start" (a level started) or "end"."""
    paths = list(out_dir.glob("*.sqlite"))
    if not paths:
        return ""
    try:
        with Recording.open(paths[0]) as recording:
            counts = recording.event_counts()
    except Exception:  # created but not initialised yet: look again later
        return ""
    return "end" if counts.get("sweep_finished", 0) else "start" if counts.get("level_started", 0) else ""


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid``, its live descendants and the children it has reaped (/proc)."""
    stats: dict[int, tuple[int, float, float]] = {}  # pid -> (ppid, own CPU, reaped children's CPU)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        f = text[text.rindex(")") + 2:].split()
        stats[int(entry)] = (int(f[1]), float(f[11]) + float(f[12]), float(f[13]) + float(f[14]))
    tree, todo = set(), [pid]
    while todo:
        p = todo.pop()
        tree.add(p)
        todo += [c for c, (ppid, _, _) in stats.items() if ppid == p and c not in tree]
    ticks = sum(stats[p][1] for p in tree if p in stats) + (stats[pid][2] if pid in stats else 0.0)
    return ticks / os.sysconf("SC_CLK_TCK")


def mark_sweep(pid: int, out_dir: Path, run: Run) -> str:
    """Note the process tree's CPU the first time the recording shows the sweep started, then ended."""
    stage = sweep_stage(out_dir)
    if stage and "start" not in run.marks:
        run.marks["start"] = tree_cpu_s(pid)
    if stage == "end" and "end" not in run.marks:
        run.marks["end"] = tree_cpu_s(pid)
        run.sweep_cpu_s = run.marks["end"] - run.marks["start"]
    return stage


def run_headless(args: argparse.Namespace, server: EmbeddedServer, out_dir: Path, run: Run) -> None:
    log = (out_dir / "headless.log").open("w")
    start = time.monotonic()
    proc = subprocess.Popen([*cli_args(args, server, out_dir), "--record"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        _, status, usage = wait4_bounded(proc.pid, RUN_TIMEOUT_S, lambda: mark_sweep(proc.pid, out_dir, run))
    finally:
        log.close()
    run.wall_s = time.monotonic() - start
    run.cpu_s = usage.ru_utime + usage.ru_stime
    if "start" in run.marks and "end" not in run.marks:  # it left before a poll saw the end: its exit ends it
        run.sweep_cpu_s = run.cpu_s - run.marks["start"]
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"headless run failed: see {out_dir / 'headless.log'}")


def run_tui(args: argparse.Namespace, server: EmbeddedServer, out_dir: Path, run: Run) -> None:
    cols, rows = (int(x) for x in args.size.split("x"))
    argv = cli_args(args, server, out_dir)
    if args.profile_tui:  # the TUI's main thread under cProfile, one file per run
        argv[1:1] = ["-m", "cProfile", "-o", f"{args.profile_tui}.{run.index}"]
    start = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal of the chosen size, then the app
        os.chdir(ROOT)
        os.environ["TERM"] = "xterm-256color"
        os.execv(argv[0], argv)
    ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.kill(pid, signal.SIGWINCH)
    quit_sent: float | None = None
    confirmed = False
    view_sent = not args.view  # --view: its key once the app has drawn its first screen
    deadline = time.monotonic() + RUN_TIMEOUT_S
    last_check = 0.0
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the child closed the terminal (exited)
                    break
                if not data:
                    break
                run.terminal_bytes += len(data)
                if not view_sent and run.terminal_bytes > 4096:
                    os.write(fd, args.view.encode())
                    view_sent = True
            now = time.monotonic()
            if quit_sent is None and now - last_check > 0.5:
                last_check = now
                if mark_sweep(pid, out_dir, run) == "end":
                    os.write(fd, b"q")
                    quit_sent = now
            elif quit_sent is not None and not confirmed and now - quit_sent > 1.0:
                os.write(fd, b"y")  # the running live session asks before it is stopped
                confirmed = True
            if now > deadline or (quit_sent is not None and now - quit_sent > QUIT_TIMEOUT_S):
                os.kill(pid, signal.SIGTERM)
                raise SystemExit("the TUI run did not finish in time")
        _, status, usage = wait4_bounded(pid, 30.0)
    finally:
        os.close(fd)
    run.wall_s = time.monotonic() - start
    run.cpu_s = usage.ru_utime + usage.ru_stime
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"TUI run exited with {os.waitstatus_to_exitcode(status)}")


def wait4_bounded(pid: int, timeout: float, poll: Callable[[], object] | None = None):  # noqa: ANN201 - (pid, status, rusage)
    deadline = time.monotonic() + timeout
    last_poll = 0.0
    while time.monotonic() < deadline:
        done_pid, status, usage = os.wait4(pid, os.WNOHANG)
        if done_pid == pid:
            return done_pid, status, usage
        if poll is not None and time.monotonic() - last_poll > 0.5:
            last_poll = time.monotonic()
            poll()
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return os.wait4(pid, 0)


def geo_mean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def pair_ratios(runs: list[Run], cpu_of: Callable[[Run], float]) -> str:
    """TUI over headless, CPU per request, within each ABBA pair (runs 2k and 2k+1): the spread
    between pairs is the machine's drift."""
    out = []
    for a, b in zip(runs[::2], runs[1::2], strict=False):
        t, h = (a, b) if a.mode == "tui" else (b, a)
        if t.requests and h.requests and math.isfinite(cpu_of(t)) and math.isfinite(cpu_of(h)) and cpu_of(h) > 0:
            out.append(f"{(cpu_of(t) / t.requests) / (cpu_of(h) / h.requests):.3f}")
    return ", ".join(out) or "n/a"


def report(runs: list[Run], args: argparse.Namespace) -> None:
    levels = sorted({level for r in runs for level in r.levels})
    by_mode = {m: [r for r in runs if r.mode == m] for m in ("headless", "tui")}
    print(f"\nTUI overhead: model {args.model}, concurrency {args.concurrency}, {args.pairs} pairs (ABBA), "
          f"TUI terminal {args.size}, view {args.view or 'live'}, windows {args.window_ms} ms, "
          f"{f'{args.gpus} synthetic GPUs at {args.gpu_hz:g} Hz' if args.gpus else 'the box own GPUs'}")
    head = f"{'level':>6}  {'headless infer/s':>22}  {'TUI infer/s':>22}  {'ratio':>6}  {'headless p99 ms':>22}  {'TUI p99 ms':>22}  {'ratio':>6}"
    print(head)
    tput_ratios, p99_ratios = [], []

    def cell(values: list[float], scale: float = 1.0) -> str:
        vals = [v * scale for v in values]
        return f"{statistics.median(vals):8.1f} ({min(vals):.1f}-{max(vals):.1f})"

    for level in levels:
        h_t = [r.levels[level][0] for r in by_mode["headless"] if level in r.levels]
        t_t = [r.levels[level][0] for r in by_mode["tui"] if level in r.levels]
        h_p = [r.levels[level][1] for r in by_mode["headless"] if level in r.levels]
        t_p = [r.levels[level][1] for r in by_mode["tui"] if level in r.levels]
        if not (h_t and t_t):
            continue
        rt = statistics.median(t_t) / statistics.median(h_t)
        rp = statistics.median(t_p) / statistics.median(h_p)
        tput_ratios.append(rt)
        p99_ratios.append(rp)
        print(f"{level:>6g}  {cell(h_t):>22}  {cell(t_t):>22}  {rt:6.3f}  {cell(h_p, 1000):>22}  {cell(t_p, 1000):>22}  {rp:6.3f}")
    unstable = sum(1 for r in runs for s in r.statuses.values() if s != "stable")
    total = sum(len(r.statuses) for r in runs)
    print(f"levels not stable: {unstable} of {total} (unstable levels are noisier; the ratios include them)")
    for mode, rs in by_mode.items():
        cpu = statistics.median(r.cpu_s for r in rs)
        wall = statistics.median(r.wall_s for r in rs)
        extra = ""
        if mode == "tui":
            extra = f", terminal output {statistics.median(r.terminal_bytes / r.wall_s for r in rs) / 1024:.1f} KiB/s"
        print(f"{mode:>8}: median wall {wall:.1f} s, CPU of the tool + load workers {cpu:.1f} s{extra}")
    per_request = {m: [r.cpu_s / r.requests * 1e6 for r in rs if r.requests] for m, rs in by_mode.items()}
    if per_request["headless"] and per_request["tui"]:
        h, u = statistics.median(per_request["headless"]), statistics.median(per_request["tui"])
        print(f"client CPU per request (tool + load workers): headless {h:.0f} µs (rounds "
              f"{', '.join(f'{v:.0f}' for v in per_request['headless'])}), TUI {u:.0f} µs "
              f"(rounds {', '.join(f'{v:.0f}' for v in per_request['tui'])}), ratio {u / h:.3f}; "
              f"ratio of each pair {pair_ratios(runs, lambda r: r.cpu_s)}")
    in_sweep = {m: [r.sweep_cpu_s / r.requests * 1e6 for r in rs if r.requests and math.isfinite(r.sweep_cpu_s)]
                for m, rs in by_mode.items()}
    if in_sweep["headless"] and in_sweep["tui"]:
        h, u = statistics.median(in_sweep["headless"]), statistics.median(in_sweep["tui"])
        print(f"  the same from the first level's start to the sweep's end (start-up and quitting left out, "
              f"polled every 0.5 s; headless: to its exit if it left first): headless {h:.0f} µs (rounds {', '.join(f'{v:.0f}' for v in in_sweep['headless'])}), "
              f"TUI {u:.0f} µs (rounds {', '.join(f'{v:.0f}' for v in in_sweep['tui'])}), ratio {u / h:.3f}; "
              f"ratio of each pair {pair_ratios(runs, lambda r: r.sweep_cpu_s)}; target <= {1 + TARGET_CPU_EXCESS:.2f}")
    t, p = geo_mean(tput_ratios), geo_mean(p99_ratios)
    print(f"throughput ratio TUI/headless (geometric mean over levels): {t:.3f}  target >= {TARGET_THROUGHPUT} "
          f"{'met' if t >= TARGET_THROUGHPUT else 'MISSED'}")
    print(f"p99 ratio TUI/headless (geometric mean over levels):        {p:.3f}  target <= {TARGET_P99} "
          f"{'met' if p <= TARGET_P99 else 'MISSED'}")


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0],
        epilog="Fits: CPU here (the identity model is client-bound: the strictest case), or a GPU box with textual\n"
               "carried (python -m bench carry --textual here, then .carry as the run's carry), about 6 minutes:\n"
               "  python -m bench tui_overhead --pairs 3 --concurrency 1,4,16 --window-ms 1000 --max-windows 5 --size 120x40")
    parser.add_argument("--model", default="identity", help="identity (client-bound: the strictest), vit_tiny, openclip_vit_b32")
    parser.add_argument("--variant", default="cpu", help="embedded server instance groups: cpu, 1x, 2x, 4x, 8x, auto")
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--pairs", type=int, default=3, help="headless/TUI pairs (ABBA order)")
    parser.add_argument("--window-ms", type=int, default=2000)
    parser.add_argument("--max-windows", type=int, default=6)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--size", default="100x40", help="the TUI's terminal, COLSxROWS")
    parser.add_argument("--view", default="6", metavar="KEY",
                        help="the view the TUI shows during its runs, by its key (6, the default: the charts; '': the live view)")
    parser.add_argument("--gpus", type=int, default=8,
                        help="synthetic GPUs in both modes, instead of the box's own (bench/synthetic_gpus.py); 0: the box's")
    parser.add_argument("--gpu-hz", type=float, default=5.0, help="their samples per second")
    parser.add_argument("--profile-tui", metavar="PREFIX", help="run each TUI under cProfile into PREFIX.N (inflates its CPU)")
    parser.add_argument("--keep", action="store_true", help="keep the recordings (printed folder)")
    return parser


def run(args: argparse.Namespace) -> int:
    if not all(x.isdigit() for x in args.size.split("x")) or args.size.count("x") != 1:
        print(f"tui_overhead: --size {args.size!r} is not COLSxROWS", file=sys.stderr)
        return 2
    if args.gpus < 0 or not 0 < args.gpu_hz <= 10 or args.pairs < 1:
        print("tui_overhead: --gpus must be >= 0, --gpu-hz in (0, 10], --pairs >= 1", file=sys.stderr)
        return 2

    work = Path(tempfile.mkdtemp(prefix="gpuscale-tui-overhead-"))
    runs: list[Run] = []
    order = []
    for pair in range(args.pairs):
        order += ["headless", "tui"] if pair % 2 == 0 else ["tui", "headless"]
    with EmbeddedServer(model=args.model, variant=args.variant, log_dir=work / "server") as server:
        for i, mode in enumerate(order):
            out_dir = work / f"{i:02d}_{mode}"
            out_dir.mkdir()
            run = Run(mode, i)
            (run_headless if mode == "headless" else run_tui)(args, server, out_dir, run)
            read_results(out_dir, run)
            runs.append(run)
            levels = ", ".join(f"{lv:g}: {ips:.1f}/s p99 {p99 * 1000:.1f} ms" for lv, (ips, p99) in sorted(run.levels.items()))
            print(f"run {i + 1}/{len(order)} {mode:>8}: {levels}", flush=True)
    report(runs, args)
    if args.keep:
        print(f"recordings: {work}")
    else:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0
