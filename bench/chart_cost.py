"""The charts view's drawing cost: one refresh of its charts (the knee, throughput and p99 over
600 windows with 8 level boundaries, 8 GPUs' utilization histories) drawn by tui/plots.py and by
plotext, from the same numbers, in CPU milliseconds per refresh (process time; median of rounds).

plotext is not a dependency: `pip install plotext` first. Nothing is asserted: a measurement.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Callable

from rich.text import Text

WIDTH = 58  # a chart's plot columns in the 120-column layout


def _data(gpus: int) -> tuple[list, list, list]:
    rng = random.Random(0)
    windows = [(t * 2.0, 1000 + 400 * math.sin(t / 20) + rng.uniform(-50, 50), 0.005 + rng.random() * 0.01)
               for t in range(600)]
    levels = [(180.0 * i, 0.002 * i, 0.005 * i) for i in range(1, 9)]
    histories = [[rng.uniform(0, 100) for _ in range(300)] for _ in range(gpus)]
    return windows, levels, histories


def ours(windows: list, levels: list, histories: list) -> list[Text]:
    from tui import plots

    out = plots.line_chart([plots.Line("p50", [(x, a) for x, a, _ in levels], "cyan", markers=True),
                            plots.Line("p99", [(x, b) for x, _, b in levels], "red", markers=True)],
                           WIDTH, 10, log_y=True).lines
    out += plots.line_chart([plots.Line("tp", [(t, v) for t, v, _ in windows], "green")], WIDTH, 5,
                            marks=[(i * 150.0, str(i)) for i in range(8)]).lines
    out += plots.line_chart([plots.Line("p99", [(t, p) for t, _, p in windows], "red")], WIDTH, 5, log_y=True).lines
    for history in histories:
        out += [Text(row, style="green") for row in plots.area_rows(history, 70, 2, 100.0)]
    return out


def plotext_charts(windows: list, levels: list, histories: list) -> list[Text]:
    import plotext as plt

    def chart(draw: Callable[[], object], width: int, height: int) -> Text:
        plt.clf()
        plt.theme("clear")
        plt.plotsize(width, height)
        draw()
        return Text.from_ansi(plt.build())

    def knee() -> None:
        plt.plot([x for x, _, _ in levels], [a for _, a, _ in levels], marker="braille")
        plt.plot([x for x, _, _ in levels], [b for _, _, b in levels], marker="braille")
        plt.yscale("log")

    def throughput() -> None:
        plt.plot([t for t, _, _ in windows], [v for _, v, _ in windows], marker="braille")
        for i in range(8):
            plt.vline(i * 150.0)

    def p99() -> None:
        plt.plot([t for t, _, _ in windows], [p for _, _, p in windows], marker="braille")
        plt.yscale("log")

    out = [chart(knee, WIDTH + 7, 13), chart(throughput, WIDTH + 7, 8), chart(p99, WIDTH + 7, 8)]
    for history in histories:
        out.append(chart(lambda h=history: plt.plot(h[-140:], marker="braille", fillx=True), 78, 4))
    return out


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     epilog="Fits: any box, no server or GPU; seconds. Needs `pip install plotext`.")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--refreshes", type=int, default=10, help="refreshes timed in each round")
    return parser


def run(args: argparse.Namespace) -> int:
    try:
        import plotext  # noqa: F401
    except ImportError:
        print("chart_cost: needs plotext (pip install plotext)", file=sys.stderr)
        return 2
    if args.gpus < 1 or args.rounds < 1 or args.refreshes < 1:
        print("chart_cost: --gpus, --rounds and --refreshes must be > 0", file=sys.stderr)
        return 2
    data = _data(args.gpus)
    for name, draw in (("tui/plots.py", ours), ("plotext", plotext_charts)):
        draw(*data)  # imports and first-use costs out of the timing
        rounds = []
        for _ in range(args.rounds):
            start = time.process_time()
            for _ in range(args.refreshes):
                draw(*data)
            rounds.append((time.process_time() - start) / args.refreshes * 1000)
        print(f"{name:<13} {statistics.median(rounds):6.1f} ms CPU per refresh "
              f"(median of {args.rounds} rounds of {args.refreshes}; {min(rounds):.1f}-{max(rounds):.1f})")
    return 0
