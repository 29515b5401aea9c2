"""Is a replay at max speed still answering keys? A one-hour synthetic 8-GPU recording (GPU
samples at 5 Hz) written by the real Recorder is replayed at max speed in the TUI (Textual's
headless pilot, the charts view on); while events pour in, view keys are pressed in turn and
each is timed from the press until the app has switched view and drawn it. ``--view 1`` keeps
the live view between presses instead, for the comparison.

Prints each key's answer time (median, max) and how far the replay had got. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

VIEWS = {"1": "live", "2": "sweep", "3": "probe", "4": "log", "6": "charts"}


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     epilog="Fits: any box, no server or GPU; a minute or two.")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--hz", type=float, default=5.0, help="GPU samples per second in the recording")
    parser.add_argument("--presses", type=int, default=24)
    parser.add_argument("--size", default="120x40", help="the terminal, COLSxROWS")
    parser.add_argument("--view", default="6", choices=tuple(VIEWS), help="the view between presses (6: the charts)")
    return parser


async def _measure(path: Path, presses: int, size: tuple[int, int],
                   view: str) -> tuple[list[tuple[float, bool]], float, float, bool]:
    from engine.record.replay_source import ReplaySource
    from tui.app import GpuscaleApp

    source = ReplaySource(path, speed=None)
    app = GpuscaleApp(replay=source, title="replay_keys")
    app.attach(source, replay=source)
    times: list[tuple[float, bool]] = []  # (seconds, whether the replay was still publishing)
    async with app.run_test(size=size) as pilot:
        keys = [k for k in ("2", "1", "4") if k != view]
        keys = [x for k in keys for x in (k, view)]
        await pilot.press(view)
        await pilot.pause()
        for i in range(presses):
            key = keys[i % len(keys)]
            want = VIEWS[key]
            playing = not source.finished
            start = time.perf_counter()
            await pilot.press(key)
            while app.current_mode != want:
                await pilot.pause(0.001)
            await pilot.pause()  # the view drawn
            times.append((time.perf_counter() - start, playing))
        done_at = source.position_s
        total = source.duration_s
        finished = source.finished
    return times, done_at, total, finished


def run(args: argparse.Namespace) -> int:
    from bench.recording_scale import one_hour_run, write_with_recorder
    from tests.engine.record.synthetic_recordings import synthetic_session

    if args.minutes <= 0 or args.gpus < 1 or args.hz <= 0 or args.presses < 1:
        print("replay_keys: --minutes, --gpus, --hz and --presses must be > 0", file=sys.stderr)
        return 2
    cols, rows = (int(x) for x in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="replay_keys_") as work:
        path = Path(work) / "one_hour.sqlite"
        events = synthetic_session(replace(one_hour_run(args.minutes, args.gpus, f"{args.gpus}x"), telemetry_hz=args.hz))
        write_with_recorder(path, events)
        print(f"recording: {len(events)} events over {(events[-1].ts - events[0].ts) / 60:.1f} min, "
              f"{args.gpus} GPUs at {args.hz:g} Hz, {path.stat().st_size / 2**20:.1f} MiB")
        times, at, total, finished = asyncio.run(_measure(path, args.presses, (cols, rows), args.view))
    for label, playing in (("while the replay played", True), ("after it ended", False)):
        ms = [t * 1000 for t, p in times if p == playing]
        if ms:
            print(f"key to view drawn {label} (max speed), view {VIEWS[args.view]} between presses, {args.size}: "
                  f"median {statistics.median(ms):.0f} ms, max {max(ms):.0f} ms over {len(ms)} presses")
    print(f"replay position at the last press: {at / 60:.1f} of {total / 60:.1f} min" + (" (finished)" if finished else ""))
    return 0
