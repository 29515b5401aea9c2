"""How recordings scale: a synthetic one-hour session (8 GPUs sampled at 1 Hz, host samples at
1 Hz, a full 7-level sweep with its windows, a training probe's results) written through the
real Recorder, then opened, summarised, exported, replayed and compared.

Each figure is printed beside its anchor, measured in the same run, with the ratio:
  write       Recorder (queue + writer thread + redaction)  vs  bare executemany of the same JSON rows
  open+sum    Recording.open + summary()                      vs  the 1 s target, and vs reading + parsing every row
  replay      ReplaySource at max speed                       vs  Recording.events(), every row decoded (decoding alone)
The synthetic figures inside the recording are invented by tests/engine/record/synthetic_recordings.py; only
the timings and sizes printed here are measurements.

    python -m bench recording_scale [--minutes 60] [--gpus 8] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from engine.record.compare import compare, render_compare
from engine.record.exporters import export
from engine.record.reader import Recording
from engine.record.recorder import Recorder, to_json
from engine.record.replay_source import ReplaySource
from engine.record.schema import DDL
from tests.engine.record.synthetic_recordings import SyntheticRun, synthetic_session

OPEN_TARGET_S = 1.0
LEVELS = [1, 4, 8, 16, 32, 64, 128]


def one_hour_run(minutes: float, gpus: int, variant: str) -> SyntheticRun:
    windows = 9  # + 1 warmup window per level
    window_s = minutes * 60 / (len(LEVELS) * (windows + 1))
    return SyntheticRun(gpu_model="H200", gpu_count=gpus, variant=variant, profile_name=f"{gpus}x_h200",
                        cost_per_hour=3.5 * gpus, levels=LEVELS, window_s=window_s, windows_per_level=windows,
                        capacity_per_gpu_ips=900.0, base_latency_s=0.004)


def timed(fn, repeat: int = 3):  # noqa: ANN001, ANN201
    """Best of ``repeat`` (the least disturbed by the other work on a shared machine) and the result."""
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times), result


def write_with_recorder(path: Path, events: list) -> tuple[float, float]:
    t = time.perf_counter()
    rec = Recorder(path)
    call_times = []
    for e in events:
        c = time.perf_counter()
        rec(e)
        call_times.append(time.perf_counter() - c)
    rec.close()
    return time.perf_counter() - t, statistics.fmean(call_times)


def write_bare(path: Path, events: list) -> float:
    t = time.perf_counter()  # serialising is part of both figures
    rows = [(e.ts, e.kind, to_json(e.to_dict())) for e in events]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("BEGIN")
    for statement in filter(str.strip, DDL.split(";")):
        conn.execute(statement)
    conn.executemany("INSERT INTO events (ts, kind, data) VALUES (?, ?, ?)", rows)
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - t


def read_all_rows(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    n = sum(1 for (data,) in conn.execute("SELECT data FROM events ORDER BY seq") if json.loads(data))
    conn.close()
    return n


def open_and_summarise(path: Path):  # noqa: ANN201
    with Recording.open(path) as r:
        return r.summary()


def replay_max(path: Path) -> int:
    source = ReplaySource(path, speed=None, linger=False)
    count = [0]
    source.bus.subscribe(lambda e: count.__setitem__(0, count[0] + 1))
    source.start()
    if not source.join(600):
        source.stop()
        raise RuntimeError("replay did not finish in 600 s")
    return count[0]


def contract_decode_all(path: Path) -> int:
    with Recording.open(path) as r:  # each row decoded straight from its JSON (event_from_json)
        return sum(1 for _event in r.events())


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     epilog="Fits: any box, no server or GPU; under a minute here.")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--keep", type=Path, help="write the recording and exports here (default: a temp dir)")
    return parser


def run(args: argparse.Namespace) -> int:
    if args.minutes <= 0 or args.gpus < 1:
        print("recording_scale: --minutes and --gpus must be > 0", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="recording_scale_")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        run = one_hour_run(args.minutes, args.gpus, f"{args.gpus}x")
        events = synthetic_session(run)
        counts: dict[str, int] = {}
        for e in events:
            counts[e.kind] = counts.get(e.kind, 0) + 1
        span = events[-1].ts - events[0].ts
        print(f"synthetic session: {len(events)} events over {span / 60:.1f} min; "
              f"{counts.get('gpu_sample', 0)} GPU samples x {args.gpus} GPUs, {counts.get('host_sample', 0)} host "
              f"samples, {counts.get('window', 0)} windows, {counts.get('level_result', 0)} levels, "
              f"{counts.get('probe_result', 0)} probe results")

        path = work / "one_hour.sqlite"
        write_s, per_call = write_with_recorder(path, events)
        bare_s = write_bare(work / "bare.sqlite", events)
        size = path.stat().st_size
        print(f"\nfile size: {size / 2**20:.2f} MiB ({size / len(events):.0f} B/event, "
              f"{size / 2**20 / (span / 3600):.1f} MiB per recorded hour)")
        print(f"{'':28}{'ours':>10}{'anchor':>10}{'ratio':>8}  anchor")
        print(f"{'write (s)':28}{write_s:10.3f}{bare_s:10.3f}{write_s / bare_s:8.2f}  to_dict + json + one bare executemany")
        print(f"{'publisher call (us)':28}{per_call * 1e6:10.1f}{'':10}{'':8}  mean Recorder.__call__ (queue put)")

        best, median, summary = timed(lambda: open_and_summarise(path))
        raw_best, _m, n_rows = timed(lambda: read_all_rows(path))
        print(f"{'open + summary (s)':28}{best:10.3f}{OPEN_TARGET_S:10.3f}{best / OPEN_TARGET_S:8.2f}  target "
              f"(median {median:.3f} s)")
        print(f"{'open + summary (s)':28}{best:10.3f}{raw_best:10.3f}{best / raw_best:8.2f}  read + json.loads "
              f"all {n_rows} rows")

        for fmt in ("json", "csv", "md", "html"):
            with Recording.open(path) as r:
                t = time.perf_counter()
                out = export(r, fmt, work / "exports")
                took = time.perf_counter() - t
            print(f"{'export ' + fmt + ' (s)':28}{took:10.3f}{'':10}{'':8}  {out.stat().st_size / 1024:.0f} KiB")

        t = time.perf_counter()
        published = replay_max(path)
        replay_s = time.perf_counter() - t
        t = time.perf_counter()
        decoded = contract_decode_all(path)
        stock_s = time.perf_counter() - t
        assert published == decoded == len(events), (published, decoded, len(events))
        print(f"{'replay, max speed (s)':28}{replay_s:10.3f}{stock_s:10.3f}{replay_s / stock_s:8.2f}  "
              "Recording.events(): every row decoded, nothing published (decoding alone)")

        base = work / "one_hour_1x.sqlite"
        write_with_recorder(base, synthetic_session(one_hour_run(args.minutes, args.gpus, "1x")))
        t = time.perf_counter()
        recordings = [Recording.open(base), Recording.open(path)]
        text = render_compare(compare(recordings), "text")
        compare_s = time.perf_counter() - t
        for r in recordings:
            r.close()
        print(f"{'compare 2 x 1 h, text (s)':28}{compare_s:10.3f}{'':10}{'':8}  {len(text.splitlines())} lines")
        print(f"\nsummary check: {len(summary.levels)} levels, {len(summary.gpus)} GPUs, "
              f"{len(summary.gpu_timeline)} timeline points, saturation/verdict from the report")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
