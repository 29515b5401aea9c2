"""The embedded server's start with Triton's config auto-complete off (ours) against on (Triton's default).

For each model, in alternating rounds, an embedded server starts with `--disable-auto-complete-config`
and without it: the seconds until it is ready (EmbeddedServer's start, its repository preparation
included; each model is started once first, unmeasured, since a first start may build the model),
the CPU its process tree spent by then (tritonserver, the stubs it ran and reaped, the
stubs still running), and whether the model config Triton serves is the same both ways.

    python -m bench server_start --models identity,toy_llm --rounds 3

Writes server_start.json to $OUT or .bench-out/.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from typing import Any

import psutil

from bench.common import out_dir

MODES = ("off", "on")  # auto-complete off: ours; on: Triton's default


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                epilog="Fits: any box; about 10 s per model and round here, 206 s for three models on an H200.")
    p.add_argument("--models", default="identity", help="embedded models, comma-separated")
    p.add_argument("--variant", default="auto", help="the config variant (auto: the box's)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds, each mode once a round")
    return p


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process and everything under it, the reaped children included."""
    total = 0.0
    root = psutil.Process(pid)
    for proc in (root, *root.children(recursive=True)):
        try:
            t = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def _one(model: str, variant: str, mode: str) -> dict[str, Any]:
    from engine.server.embedded import EmbeddedServer

    logs = out_dir() / "server_start" / f"{model}_{mode}"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with EmbeddedServer(model=model, variant=variant, log_dir=logs, auto_complete=mode == "on") as srv:
        ready_s = time.monotonic() - started
        cpu_s = _tree_cpu(srv.pid)
        with urllib.request.urlopen(f"{srv.http_url}/v2/models/{srv.model}/config", timeout=10) as resp:  # noqa: S310
            config = json.loads(resp.read())
    return {"model": model, "mode": mode, "ready_s": round(ready_s, 3), "server_cpu_s": round(cpu_s, 3), "config": config}


def table(rows: list[dict[str, Any]], models: list[str]) -> list[str]:
    lines = ["| model | auto-complete | ready, s per round | mean | server CPU by then, CPU-s | config |",
             "|---|---|---|---:|---:|---|"]
    for model in models:
        configs = {json.dumps(r["config"], sort_keys=True) for r in rows if r["model"] == model}
        for mode in MODES:
            got = [r for r in rows if r["model"] == model and r["mode"] == mode]
            if not got:
                continue
            ready = [r["ready_s"] for r in got]
            cpu = [r["server_cpu_s"] for r in got]
            lines.append(f"| {model} | {mode} | {', '.join(f'{x:.2f}' for x in ready)} | {sum(ready) / len(ready):.2f} | "
                         f"{sum(cpu) / len(cpu):.2f} | {'the same both ways' if len(configs) == 1 else 'DIFFERS'} |")
    return lines


def run(args: argparse.Namespace) -> int:
    from engine.errors import UserError
    from engine.profiles import scale_out_parts

    if scale_out_parts(args.variant) is not None:
        raise UserError(f"--variant {args.variant}: a fleet of servers; this stage times one server's start")
    models = [m for m in args.models.split(",") if m]
    rows: list[dict[str, Any]] = []
    out = out_dir() / "server_start.json"
    for model in models:
        _one(model, args.variant, "off")  # unmeasured: a model's first start may build it (an ONNX export)
        for rnd in range(args.rounds):
            for mode in (MODES if rnd % 2 == 0 else tuple(reversed(MODES))):
                row = {"round": rnd, **_one(model, args.variant, mode)}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "config"}), flush=True)
                out.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    print()
    print("\n".join(table(rows, models)))
    return 0
