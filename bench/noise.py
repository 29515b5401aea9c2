"""Noise: the same run quiet, then under CPU hogs that are not ours; do the answer lines agree
within the measured spread, or does the noisy one say it is not decided?

Runs `gpuscale-tui run --record` (or, with --study, `study --variants V --slo ...`) twice with
the same profile and settings: first on the box as it is, then with --hogs busy processes (half
the usable cores by default) held for the whole run. Prints both answer lines, each level's
status, trials and the CPU others took, and the verdict, to noise.md beside the recordings.

    python -m bench noise --profile 1x_h200                  # the default run
    python -m bench noise --profile 1x_h200 --study --variants 1x --slo p99=50ms
    python -m bench noise --profile local --set load.concurrency=1,2,4 --hogs 1   # a CPU box

Writes noise.md, noise.json, the logs and the recordings to $OUT or .bench-out/.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, out_dir, stamp
from bench.hogs import cpu_hogs
from engine.hostinfo import process_cores


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                epilog="Fits: 1x H200/H100, one 10-minute call with short windows (--set "
                                       "load.window_ms=2000 --set load.warmup_s=2); a CPU box, a few minutes.")
    p.add_argument("--profile", default="local")
    p.add_argument("--hogs", type=int, default=0, help="busy processes during the second run (0: half the usable cores)")
    p.add_argument("--study", action="store_true", help="a study instead of a run")
    p.add_argument("--variants", default="1x")
    p.add_argument("--slo", default="p99=50ms", help="the study's latency target")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--timeout-s", type=float, default=540.0, help="each run's limit")
    p.add_argument("--recordings", type=Path, default=None,
                   help="where the recordings go (default: beside noise.md; a device run brings back few files)")
    return p


def _command(args: argparse.Namespace, output: Path) -> list[str]:
    head = [sys.executable, "-m", "tui.cli"]
    if args.study:
        head += ["study", "--headless", "--variants", args.variants, "--slo", args.slo]
    else:
        head += ["run", "--record", "--no-check"]
    sets = [x for item in args.overrides for x in ("--set", item)]
    return [*head, "--profile", args.profile, "--output", str(output), *sets]


def _answer(text: str) -> str:
    return next((line for line in reversed(text.splitlines()) if line.startswith("answer: ")), "answer: (none printed)")


def _levels(folder: Path) -> list[dict[str, Any]]:
    from engine.record.reader import Recording

    rows = []
    for path in sorted(folder.glob("*.sqlite")):
        with Recording.open(path) as rec:
            for lv in rec.summary().levels:
                r = lv.result
                rows.append({"recording": path.name, "level": r.level, "status": r.status, "trial": r.trial,
                             "images_s": round(r.throughput_ips, 1),
                             "p99_ms": round(r.latency.p99 * 1000, 2) if r.latency.p99 is not None else None,
                             "others_cpu": round(r.others_cpu, 3) if r.others_cpu is not None else None,
                             "steal": round(r.steal, 3) if r.steal is not None else None})
    return rows


def _one(args: argparse.Namespace, out: Path, name: str, hogs: int) -> dict[str, Any]:
    folder = (args.recordings or out) / f"noise_{name}"
    folder.mkdir(parents=True, exist_ok=True)
    log = out / f"noise_{name}.log"
    started = time.monotonic()
    with log.open("w") as f:
        if hogs:
            with cpu_hogs(hogs, folder) as pids:
                print(f"{name}: {len(pids)} hogs: {pids}", file=f, flush=True)
                code, text = _run(args, folder)
        else:
            code, text = _run(args, folder)
        f.write(text)
    return {"name": name, "hogs": hogs, "exit_code": code, "seconds": round(time.monotonic() - started, 1),
            "answer": _answer(text), "levels": _levels(folder)}


def _run(args: argparse.Namespace, folder: Path) -> tuple[int | str, str]:
    """The run's exit code (or "timeout") and its output."""
    try:
        done = subprocess.run(_command(args, folder), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=args.timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return "timeout", out
    return done.returncode, done.stdout


def run(args: argparse.Namespace) -> int:
    out = out_dir() / f"noise_{stamp()}"
    out.mkdir(parents=True, exist_ok=True)
    hogs = args.hogs or max(1, process_cores() // 2)
    runs = [_one(args, out, "quiet", 0), _one(args, out, "hogs", hogs)]
    (out / "noise.json").write_text(json.dumps(runs, indent=1))
    lines = [f"# noise: {' '.join(_command(args, Path('OUT')))[len(sys.executable) + 1:]}", ""]
    for r in runs:
        lines += [f"## {r['name']} ({r['hogs']} hogs, exit {r['exit_code']}, {r['seconds']} s)", "", f"`{r['answer']}`", "",
                  "| recording | level | status | trial | images/s | p99 ms | others' CPU | steal |",
                  "|---|---:|---|---:|---:|---:|---:|---:|"]
        for lv in r["levels"]:
            lines.append("| " + " | ".join(str(lv[k]) for k in ("recording", "level", "status", "trial", "images_s",
                                                                  "p99_ms", "others_cpu", "steal")) + " |")
        lines.append("")
    (out / "noise.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0
