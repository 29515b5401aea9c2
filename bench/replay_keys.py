"""Is a replay at max speed still answering keys? A one-hour synthetic 8-GPU recording (GPU
samples at 5 Hz) written by the real Recorder is replayed at max speed in the TUI (Textual's
headless pilot, the charts view on); while events pour in, view keys are pressed in turn and
each is timed from the key's arrival until the app has switched view and drawn it. ``--view 1`` keeps
the live view between presses instead, for the comparison.

Prints each key's answer time (median, max) and how far the replay had got. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bench.loop_stalls import StallWatch
from engine.record import replay_source

if TYPE_CHECKING:
    from textual.app import App

TARGET_MS = 200  # a key is answered within this
VIEWS = {"1": "live", "2": "sweep", "3": "probe", "4": "log", "6": "charts"}


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     epilog="Fits: any box, no server or GPU (a GPU box: python -m bench carry --textual here, .carry carried); about 3 minutes.")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--hz", type=float, default=5.0, help="GPU samples per second in the recording")
    parser.add_argument("--presses", type=int, default=24, help="key presses per round")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the presses only (from key to drawn) into FILE")
    parser.add_argument("--stalls", action="store_true",
                        help="name what holds the app's event loop over 50 ms during the presses (a sampling watch)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each a fresh app")
    parser.add_argument("--size", default="120x40", help="the terminal, COLSxROWS")
    parser.add_argument("--view", default="6", choices=tuple(VIEWS), help="the view between presses (6: the charts)")
    parser.add_argument("--against-unpaced", action="store_true",
                        help="alternate rounds with the replay paced by the screen's backlog (the app's way) and "
                             "unpaced (the anchor: publishing as fast as it decodes); a summary of each")
    return parser


async def _answer_time(app: App[int], key: str, mode: str) -> tuple[float, float]:
    """Seconds from a key's arrival (posted as the terminal's driver posts it) until the app shows
    ``mode`` and has drawn it, and the CPU seconds the app's thread (the event loop's, this one)
    spent meanwhile: on a busy machine the wait is mostly the scheduler's, the CPU is the app's.
    Not the pilot's press: that also waits for the process to idle, up to a second each time,
    which a replay at max speed never lets it do."""
    from textual import events

    cpu = time.thread_time()
    start = time.perf_counter()
    app.post_message(events.Key(key, key))
    while app.current_mode != mode or not app.screen.is_mounted:
        await asyncio.sleep(0.001)
    await app.screen.wait_for_refresh()  # the screen's next update is painted
    return time.perf_counter() - start, time.thread_time() - cpu


@dataclass(frozen=True)
class Press:
    wall_s: float  # key to view drawn
    cpu_s: float  # the app's thread's CPU meanwhile
    playing: bool  # events were still pouring in (published or queued)
    first: bool  # the view's first showing in this app (its screen is composed then)
    view: str = ""


async def _measure(path: Path, presses: int, size: tuple[int, int], view: str,
                   profile: cProfile.Profile | None = None, composed_ahead_s: list[float] | None = None,
                   stalls: StallWatch | None = None) -> list[Press]:
    """One round: a fresh app replaying ``path`` at max speed; ``presses`` view keys, each timed
    from the key until the view is switched and drawn. Before each press a replay that has
    ended (every event published and folded) is started again from the top, untimed, so that
    every press meets events pouring in. The presses start once the app has composed its views
    ahead (off-screen, after start; the wait is added to ``composed_ahead_s``)."""
    from engine.record.replay_source import ReplaySource
    from tui.app import GpuscaleApp

    source = ReplaySource(path, speed=None)
    app = GpuscaleApp(replay=source, title="replay_keys")
    app.attach(source, replay=source)
    out: list[Press] = []
    composed_ahead_s = [] if composed_ahead_s is None else composed_ahead_s
    seen = {VIEWS[view]}
    async with app.run_test(size=size):
        keys = [k for k in ("2", "1", "4") if k != view]
        keys = [x for k in keys for x in (k, view)]
        await _answer_time(app, view, VIEWS[view])  # untimed: the view between presses
        start = time.perf_counter()
        while not app.views_composed_ahead:  # every view composed, laid out and styled ahead, off-screen
            await asyncio.sleep(0.01)
        composed_ahead_s.append(time.perf_counter() - start)
        if stalls is not None:
            stalls.start()
        for i in range(presses):
            if source.finished and not app.inbox:
                source.seek(0.0)
                source.resume()
                while not app.inbox and not source.finished:  # events flowing again
                    await asyncio.sleep(0.01)
            key = keys[i % len(keys)]
            playing = not source.finished or bool(app.inbox)
            if profile is not None:
                profile.enable()
            wall, cpu = await _answer_time(app, key, VIEWS[key])
            if profile is not None:
                profile.disable()
            out.append(Press(wall, cpu, playing, VIEWS[key] not in seen, VIEWS[key]))
            seen.add(VIEWS[key])
        if stalls is not None:
            stalls.stop()
    return out


def _summary(presses: list[Press]) -> str:
    wall = [p.wall_s * 1000 for p in presses]
    cpu = [p.cpu_s * 1000 for p in presses]
    return (f"median {statistics.median(wall):.0f} ms (app thread CPU {statistics.median(cpu):.0f} ms), "
            f"max {max(wall):.0f} ms (CPU {max(cpu):.0f}), {sum(1 for w in wall if w <= TARGET_MS)} of "
            f"{len(wall)} within {TARGET_MS} ms")


def run(args: argparse.Namespace) -> int:
    from bench.recording_scale import one_hour_run, write_with_recorder
    from tests.engine.record.synthetic_recordings import synthetic_session

    if args.minutes <= 0 or args.gpus < 1 or args.hz <= 0 or args.presses < 1 or args.rounds < 1:
        print("replay_keys: --minutes, --gpus, --hz, --presses and --rounds must be > 0", file=sys.stderr)
        return 2
    cols, rows = (int(x) for x in args.size.split("x"))
    rounds: list[list[Press]] = []
    profile = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory(prefix="replay_keys_") as work:
        path = Path(work) / "one_hour.sqlite"
        events = synthetic_session(replace(one_hour_run(args.minutes, args.gpus, f"{args.gpus}x"), telemetry_hz=args.hz))
        write_with_recorder(path, events)
        print(f"recording: {len(events)} events over {(events[-1].ts - events[0].ts) / 60:.1f} min, "
              f"{args.gpus} GPUs at {args.hz:g} Hz, {path.stat().st_size / 2**20:.1f} MiB; "
              f"view {VIEWS[args.view]} between presses, {args.size}, replay at max speed")
        del events  # not the app's: kept, they would lengthen every full garbage collection of its process
        for r in range(args.rounds):
            anchor = args.against_unpaced and r % 2 == 1
            _pacing(not anchor)
            ahead: list[float] = []
            watch = StallWatch() if args.stalls else None
            presses = asyncio.run(_measure(path, args.presses, (cols, rows), args.view, profile, ahead, watch))
            rounds.append(presses)
            playing = sum(1 for p in presses if p.playing)
            print(f"round {r + 1}/{args.rounds}{' (unpaced)' if anchor else ''} ({playing} of {len(presses)} presses while events poured in; "
                  f"every view composed {sum(ahead) * 1000:.0f} ms after the first key): "
                  f"{_summary(presses)}; first showings: "
                  f"{', '.join(f'{p.view} {p.wall_s * 1000:.0f} ms (CPU {p.cpu_s * 1000:.0f})' for p in presses if p.first)}",
                  flush=True)
            if watch is not None:
                print(watch.report(), flush=True)
    if profile is not None:
        profile.dump_stats(args.profile)
        print(f"profile of the presses: {args.profile}")
    groups = [("", rounds)]
    if args.against_unpaced:
        groups = [("paced: ", rounds[0::2]), ("unpaced (anchor): ", rounds[1::2])]
    for prefix, chosen_rounds in groups:
        every = [p for presses in chosen_rounds for p in presses]
        for label, chosen in (("a view shown before", [p for p in every if not p.first]),
                              ("a view's first showing", [p for p in every if p.first])):
            if chosen:
                medians = [statistics.median([p.wall_s * 1000 for p in presses if p.first == chosen[0].first]
                                             or [math.nan]) for presses in chosen_rounds]
                print(f"{prefix}key to {label}: {_summary(chosen)}; round medians "
                      f"{', '.join(f'{m:.0f}' for m in medians)} ms")
    return 0


PACED_BACKLOG = replay_source.MAX_BACKLOG  # the app's, kept for the paced rounds


def _pacing(on: bool) -> None:
    """The app's way (a max-speed replay paced by the screen's backlog) or the anchor's (unpaced)."""
    replay_source.MAX_BACKLOG = PACED_BACKLOG if on else sys.maxsize
