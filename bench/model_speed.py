"""How fast the embedded ViT serves on a GPU box, in one call of a few minutes.

Steps (each in its own subprocess with its own timeout; a failed step is reported, the others run):
  forward   in-process ViT-B/32 fp16 on GPU 0: a correctness check of the staging (host, same-GPU
            and peer-GPU inputs, graph vs eager), then images/s of eager vs CUDA graph at batch
            16/32/64/128, the whole in-process batch path (host inputs -> staging -> graph ->
            pinned output) and the host copy bandwidth into pinned memory per torch thread count.
  compile   the same forward through torch.compile (+ CUDA graphs), with its compile time.
  serve     the real embedded Triton (tui.cli server) measured by perf_analyzer 2.41 with
            --shared-memory none|system|cuda at a few concurrency levels, per variant and per
            instance count (configs changed only in their count, in a temporary copy of the
            repository), with GPU busy % (NVML) and the server's batch sizes during each run.
  wire      the same for the `wire` model (no compute, 4 bytes back): the request path's ceiling.

Everything lands under --out (default $OUT or .bench-out/): results.jsonl (one line per
measurement), logs/, table.txt.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, GpuBusy, gpu_memory_used_mib, model_stats, out_dir, stats_delta

EMBEDDED = ROOT / "model_repository" / "embedded"
VIT_ITEM = 3 * 224 * 224
PY = sys.executable
STAGE = [PY, "-m", "bench", "model_speed"]


# ----------------------------------------------------------------------------- small helpers


def emit(out: Path, record: dict) -> None:
    """One measurement, appended to results.jsonl and echoed."""
    line = json.dumps(record, default=str)
    with open(out / "results.jsonl", "a") as f:
        f.write(line + "\n")
    print(line, flush=True)


def elapsed_since(start: float) -> float:
    return time.monotonic() - start


# ----------------------------------------------------------------------------- forward (in-process)


def _load_model_modules():
    sys.path.insert(0, str(EMBEDDED))
    sys.path.insert(0, str(ROOT / "model_repository"))
    import vit  # noqa: PLC0415
    import vit_batching  # noqa: PLC0415

    return vit, vit_batching


def _rate(torch, step, batch: int, seconds: float) -> float:
    """Images/s of step() (one batch), synchronised at the end of the timed loop."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start, iters = time.perf_counter(), 0
    while True:
        for _ in range(10):
            step()
        iters += 10
        torch.cuda.synchronize()
        if time.perf_counter() - start >= seconds:
            break
    return batch * iters / (time.perf_counter() - start)


def cmd_forward(args) -> int:
    out = Path(args.out)
    import torch

    if not torch.cuda.is_available():
        emit(out, {"step": args.step_name, "status": "skipped: no CUDA device"})
        return 0
    vit, vb = _load_model_modules()
    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    batches = sorted(int(b) for b in args.batches.split(","))
    capacity = max(batches)
    model = vit.build_vit(args.arch).to(dev, torch.float16)
    stream = torch.cuda.Stream(dev)
    modes = args.modes.split(",")

    if "check" in modes:  # staging from the host, the same GPU and a peer GPU; graph == eager
        stager = vb.Stager(16, (3, 224, 224), dev)
        runner = vb.Runner(model, stager, vb.bucket_sizes(16), torch.float16, "graph")
        with torch.cuda.stream(stream):
            runner.prepare()
        gen = torch.Generator().manual_seed(0)
        parts = [torch.rand(k, 3, 224, 224, generator=gen) for k in (3, 2, 1, 2)]
        places = ["cpu", "cuda:0", f"cuda:{min(1, torch.cuda.device_count() - 1)}", "cpu"]
        inputs = [p.to(place) for p, place in zip(parts, places, strict=False)]
        with torch.cuda.stream(stream):
            n = stager.stage(inputs)
            got = runner.run(n).cpu()
        with torch.inference_mode():
            want = model(torch.cat(parts).to(dev, torch.float16)).float().cpu()
        diff = float((got - want).abs().max())
        scale = float(want.abs().max())
        emit(out, {
            "step": args.step_name, "what": "check", "places": places, "copies": stager.copies,
            "runner": runner.mode, "fallback": runner.fallback, "max_abs_diff": diff, "max_abs": scale,
            "ok": diff <= 0.02 * scale and runner.fallback is None,
        })

    for mode in [m for m in modes if m in vb.RUNNER_MODES]:
        stager = vb.Stager(capacity, (3, 224, 224), dev)
        runner = vb.Runner(model, stager, tuple(batches), torch.float16, mode)
        with torch.cuda.stream(stream):
            prepare_s = runner.prepare()
            for b in batches:
                ips = _rate(torch, lambda b=b, runner=runner: runner.run(b), b, args.seconds)
                emit(out, {"step": args.step_name, "what": "forward", "runner": mode, "batch": b,
                           "images_per_s": round(ips, 1), "prepare_s": round(prepare_s, 1),
                           "fallback": runner.fallback})
        if mode == "graph" and "pipeline" in modes:
            _pipeline(out, args, torch, vb, model, stream, dev, batches)
        del runner, stager
        torch.cuda.empty_cache()

    if "copy" in modes:  # the host copy into pinned staging (shm -> pinned) per torch thread count
        src = torch.rand(64, 3, 224, 224)
        dst = torch.empty_like(src).pin_memory()
        for threads in (1, 2, 4, 8):
            torch.set_num_threads(threads)
            start, reps = time.perf_counter(), 0
            while time.perf_counter() - start < 0.5:
                for i in range(64):
                    dst[i].copy_(src[i])
                reps += 1
            gbps = reps * src.numel() * 4 / (time.perf_counter() - start) / 1e9
            emit(out, {"step": args.step_name, "what": "host_copy", "threads": threads, "GB_per_s": round(gbps, 2),
                       "images_per_s": round(gbps * 1e9 / (VIT_ITEM * 4), 1)})
    return 0


def _pipeline(out, args, torch, vb, model, stream, dev, batches) -> None:
    """What one model instance does per batch, minus Triton: inputs (one per request, batch 1)
    staged, the graph, one device-to-host copy into pinned memory, a synchronise."""
    capacity = max(batches)
    stager = vb.Stager(capacity, (3, 224, 224), dev)
    runner = vb.Runner(model, stager, tuple(batches), torch.float16, "graph")
    out_host = torch.empty((capacity, 512), pin_memory=True)
    sources = {"host": torch.rand(capacity, 1, 3, 224, 224)}
    sources["gpu0"] = sources["host"].to(dev)
    if torch.cuda.device_count() > 1:
        sources["peer_gpu"] = sources["host"].to("cuda:1")
    with torch.cuda.stream(stream):
        runner.prepare()
        for name, src in sources.items():
            for b in [b for b in batches if b >= 16]:
                inputs = [src[i] for i in range(b)]

                def step(inputs=inputs, b=b):
                    n = stager.stage(inputs)
                    out_host[:n].copy_(runner.run(n), non_blocking=True)
                    stream.synchronize()

                ips = _rate(torch, step, b, args.seconds)
                emit(out, {"step": args.step_name, "what": "pipeline", "inputs_on": name, "batch": b,
                           "images_per_s": round(ips, 1)})


# ----------------------------------------------------------------------------- Triton + perf_analyzer


def make_root(dest: Path, model: str, count: int | None, settings: list[str] | None = None) -> Path:
    """A copy of the embedded models with every instance_group count of ``model`` set to count and
    each "key=value" of settings applied to its configs: max_queue_delay_microseconds and
    preferred_batch_size ("32 64") change the batcher, any other key is a model parameter."""
    root = dest / "embedded"
    shutil.copytree(EMBEDDED / model, root / model)
    for cfg in (root / model).glob("config*.pbtxt"):
        text = cfg.read_text()
        if count is not None:
            text = re.sub(r"count:\s*\d+", f"count: {count}", text)
        for item in settings or []:
            key, _, value = item.partition("=")
            if key == "max_queue_delay_microseconds":
                text = re.sub(r"max_queue_delay_microseconds:\s*\d+", f"{key}: {int(value)}", text)
            elif key == "preferred_batch_size":
                sizes = ", ".join(value.replace(",", " ").split())
                text = re.sub(r"preferred_batch_size:\s*\[[^\]]*\]", f"preferred_batch_size: [ {sizes} ]", text)
            else:
                line = f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}'
                pattern = rf'parameters \{{ key: "{re.escape(key)}"[^\n]*'
                text = re.sub(pattern, line, text) if re.search(pattern, text) else text.rstrip("\n") + "\n" + line + "\n"
        cfg.write_text(text)
    return root


class Server:
    """`tui.cli server` (through the `server` subcommand below, which points the repository at a
    temporary copy), its log kept under logs/."""

    def __init__(self, out: Path, name: str, root: Path, model: str, variant: str, timeout_s: float,
                 mps: str = "auto") -> None:
        self.out, self.name, self.model = out, name, model
        self.stdout_path = out / "logs" / f"{name}.server.out"
        self.stdout = open(self.stdout_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [*STAGE, "server", "--root", str(root), "--model", model, "--variant", variant, "--mps", mps],
            stdout=self.stdout, stderr=subprocess.STDOUT, cwd=str(ROOT), start_new_session=True,
        )
        self.url = self.log = None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            text = self.stdout_path.read_text(errors="replace")
            if m := re.search(r"^HTTP\s+(\S+)", text, re.M):
                self.url = m.group(1)
                if lg := re.search(r"^log\s+(\S+)", text, re.M):
                    self.log = lg.group(1)
                return
            time.sleep(0.5)
        tail = self.stdout_path.read_text(errors="replace").strip().splitlines()[-3:]
        exited = self.proc.poll() is not None
        self.stop()
        what = f"server exited ({self.proc.returncode})" if exited else f"server did not start within {timeout_s:.0f} s"
        raise RuntimeError(f"{what}: {' | '.join(tail)}")

    def stop(self) -> None:
        if self.log and Path(self.log).exists():  # the work dir goes with the server
            shutil.copy(self.log, self.out / "logs" / f"{self.name}.tritonserver.log")
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.stdout.close()


def pa_command(binary: Path, url: str, model: str, level: int, mode: str, window_ms: int, stability: float,
               max_windows: int, csv_path: Path) -> list[str]:
    """perf_analyzer at one concurrency, batch 1, --shared-memory ``mode``, its CSV to csv_path."""
    return [
        str(binary), "-m", model, "-u", url.removeprefix("http://"), "-i", "http", "-b", "1",
        "--concurrency-range", str(level), "--shared-memory", mode, "--output-shared-memory-size", "65536",
        "--measurement-interval", str(window_ms), "-s", str(stability), "-r", str(max_windows), "-f", str(csv_path),
    ]


def run_pa(binary: Path, env: dict, url: str, model: str, level: int, mode: str, args, extra: list[str], log: Path) -> dict:
    csv_path = log.with_suffix(".csv")
    cmd = [*pa_command(binary, url, model, level, mode, args.window_ms, args.stability, args.max_windows, csv_path),
           "--verbose-csv", *extra]
    timeout = args.window_ms / 1000 * (args.max_windows + 3) + 45
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        log.write_text(" ".join(cmd) + "\n" + run.stdout + run.stderr)
        rc = run.returncode
    except subprocess.TimeoutExpired as exc:
        log.write_text(" ".join(cmd) + f"\nTIMEOUT after {timeout:.0f} s\n{exc.stdout or ''}{exc.stderr or ''}")
        return {"ok": False, "status": f"perf_analyzer timed out after {timeout:.0f} s"}
    if rc != 0 or not csv_path.exists():
        lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
        reason = next((ln for ln in reversed(lines) if "rror" in ln or "ailed" in ln), lines[-1] if lines else "?")
        return {"ok": False, "status": f"rc {rc}: {reason.strip()[:160]}"}
    row = list(csv.DictReader(csv_path.open()))[-1]
    us = lambda k: float(row[k]) if row.get(k) not in (None, "") else None  # noqa: E731
    return {
        "ok": True, "status": "ok", "images_per_s": float(row["Inferences/Second"]),
        "p50_ms": us("p50 latency") / 1e3, "p99_ms": us("p99 latency") / 1e3,
        "pa_server_queue_us": us("Server Queue"), "pa_compute_input_us": us("Server Compute Input"),
        "pa_compute_infer_us": us("Server Compute Infer"), "pa_client_send_us": us("Client Send"),
    }


def cmd_serve(args) -> int:
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    from bench.tools import SetupError, ensure_perf_analyzer

    try:
        binary, env = ensure_perf_analyzer()
    except SetupError as exc:
        emit(out, {"step": args.step_name, "status": f"no perf_analyzer: {exc}"})
        return 1
    count = int(args.count) if args.count else None
    extra = ["--shape", f"INPUT0:{args.wire_elements}"] if args.model == "wire" else []
    deadline = time.monotonic() + args.budget_s
    failures = 0
    with tempfile.TemporaryDirectory(prefix="gms-") as tmp:
        # "mps=on|off|auto" is the server's option (tui.cli server --mps), not a config setting
        mps = next((kv.split("=", 1)[1] for kv in args.set if kv.startswith("mps=")), "auto")
        root = make_root(Path(tmp), args.model, count, [kv for kv in args.set if not kv.startswith("mps=")])
        start = time.monotonic()
        try:
            server = Server(out, args.step_name, root, args.model, args.variant, args.start_timeout_s, mps)
        except RuntimeError as exc:
            emit(out, {"step": args.step_name, "status": str(exc)})
            return 1
        base = {"step": args.step_name, "model": args.model, "variant": args.variant, "count": args.count or "config",
                **({"settings": args.set} if args.set else {})}
        emit(out, {**base, "what": "server_start", "seconds": round(elapsed_since(start), 1),
                   "gpu_memory_used_mib": gpu_memory_used_mib()})
        try:
            for mode in args.modes.split(","):
                for level in [int(x) for x in args.levels.split(",")]:
                    if time.monotonic() > deadline:
                        emit(out, {**base, "what": "perf_analyzer", "mode": mode, "level": level, "ok": False,
                                   "status": "skipped: step budget spent"})
                        continue
                    if server.proc.poll() is not None:
                        emit(out, {**base, "what": "perf_analyzer", "mode": mode, "level": level, "ok": False,
                                   "status": "server exited"})
                        failures += 1
                        continue
                    before = model_stats(server.url, args.model)
                    with GpuBusy(skip_s=1.0) as busy:  # perf_analyzer's start-up is not load
                        res = run_pa(binary, env, server.url, args.model, level, mode, args, extra,
                                     out / "logs" / f"{args.step_name}.{mode}.c{level}.pa.log")
                    res.update(stats_delta(before, model_stats(server.url, args.model)))
                    failures += not res["ok"]
                    emit(out, {**base, "what": "perf_analyzer", "mode": mode, "level": level, "gpu_busy": busy.means(), **res})
        finally:
            server.stop()
    return 1 if failures else 0


def cmd_server(args) -> int:
    """tui.cli server against a temporary repository copy (changed instance counts)."""
    from engine.server import repository
    from tui.cli import main

    repository.EMBEDDED_ROOT = Path(args.root)
    return main(["server", "--model", args.model, "--variant", args.variant, "--mps", args.mps])


# ----------------------------------------------------------------------------- orchestration


def plan(args) -> list[tuple[str, list[str], float]]:
    """(name, arguments of this script, timeout s), most important first."""
    common = ["--out", args.out, "--window-ms", str(args.window_ms), "--stability", str(args.stability),
              "--max-windows", str(args.max_windows)]
    only = set(args.steps.split(",")) if args.steps else None
    if args.cpu_check:  # this box: prove the machinery, not the speed
        steps = [
            ("forward", ["forward", "--out", args.out, "--modes", "check,eager,graph,pipeline,copy"], 60),
            ("serve_cpu", ["serve", *common, "--model", "vit_tiny", "--variant", "cpu", "--modes", args.modes or "none,system",
                           "--levels", args.levels or "1", "--budget-s", "100"], 200),
            ("wire_cpu", ["serve", *common, "--model", "wire", "--variant", "cpu", "--modes", args.modes or "none,system",
                          "--levels", args.levels or "4", "--budget-s", "60"], 150),
        ]
        return [s for s in steps if only is None or s[0] in only]
    modes, levels = args.modes or "none,system,cuda", args.levels or "64,256"
    if args.serves:  # an A/B of server configs: these steps only, in this order
        steps = []
        for spec in filter(None, (x.strip() for x in args.serves.split(";"))):
            name, variant, count, *rest = spec.split(":")
            sets = [f"--set={kv}" for kv in (rest[0].split(",") if rest and rest[0] else [])]
            steps.append((f"serve_{name}", ["serve", *common, "--model", "openclip_vit_b32", "--variant", variant,
                                            "--count", count, "--modes", modes, "--levels", levels,
                                            "--budget-s", "150", *sets], 240))
        return steps

    def serve(variant: str, count: int) -> tuple[str, list[str], float]:
        return (f"serve_{variant}_i{count}", ["serve", *common, "--model", "openclip_vit_b32", "--variant", variant,
                                              "--count", str(count), "--modes", modes, "--levels", levels,
                                              "--budget-s", "150"], 240)

    wanted = [(v, int(c)) for c in args.counts.split(",") for v in args.variants.split(",")]
    steps = [("forward", ["forward", "--out", args.out, "--modes", "check,eager,graph,pipeline,copy"], 120)]
    if ("1x", 2) in wanted:
        steps.append(serve("1x", 2))
    steps.append(("wire", ["serve", *common, "--model", "wire", "--variant", "cpu", "--modes", modes,
                           "--levels", levels, "--budget-s", "100"], 180))
    steps += [serve(v, c) for v, c in [("2x", 2), ("1x", 1), ("1x", 3)] if (v, c) in wanted]
    steps.append(("compile", ["forward", "--out", args.out, "--modes", "compile", "--batches", args.compile_batches],
                  args.compile_timeout_s))
    steps += [serve(v, c) for v, c in wanted if (v, c) not in {("1x", 2), ("2x", 2), ("1x", 1), ("1x", 3)}]
    return [s for s in steps if only is None or s[0] in only or s[0].split("_")[0] in only]


def cmd_all(args) -> int:
    out = Path(args.out)
    start = time.monotonic()
    if shutil.which("nvidia-smi"):
        gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout.strip()
        print(f"== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}  {gpus.replace(chr(10), '; ')}", flush=True)
    summary = []
    for name, argv, timeout in plan(args):
        left = args.budget_s - elapsed_since(start)
        if left < 45:
            summary.append((name, "skipped: total budget spent"))
            emit(out, {"step": name, "status": "skipped: total budget spent"})
            continue
        timeout = min(timeout, left)
        t0 = time.monotonic()
        print(f"\n=== {name} (timeout {timeout:.0f} s)", flush=True)
        with open(out / "logs" / f"{name}.log", "w") as log:
            proc = subprocess.Popen([*STAGE, *argv, "--step-name", name], stdout=log,
                                    stderr=subprocess.STDOUT, cwd=str(ROOT), start_new_session=True)
            try:
                rc = proc.wait(timeout)
                status = "ok" if rc == 0 else f"exit {rc}"
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                status = f"timed out after {timeout:.0f} s"
            finally:  # a step's stragglers (a server group) never outlive it
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        summary.append((name, f"{status} in {elapsed_since(t0):.0f} s"))
        print(f"=== {name}: {summary[-1][1]}", flush=True)
    table = render_table(out, summary)
    (out / "table.txt").write_text(table)
    print("\n" + table, flush=True)
    return 0 if all(s.startswith("ok") for _, s in summary) else 1


def render_table(out: Path, summary: list[tuple[str, str]]) -> str:
    rows = []
    path = out / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    lines = ["steps: " + "; ".join(f"{n} {s}" for n, s in summary), ""]
    fwd = [r for r in records if r.get("what") in ("forward", "pipeline", "check", "host_copy")]
    if fwd:
        lines.append("in-process (GPU 0, ViT-B/32 fp16), images/s:")
        for r in fwd:
            if r["what"] == "check":
                lines.append(f"  check staging host/gpu/peer, graph vs eager: {'ok' if r['ok'] else 'FAILED'} "
                             f"(max |diff| {r['max_abs_diff']:.4f} of {r['max_abs']:.2f}, copies {r['copies']})")
            elif r["what"] == "forward":
                lines.append(f"  forward  {r['runner']:<8} batch {r['batch']:>4}: {r['images_per_s']:>9,.0f}"
                             f"   (prepare {r['prepare_s']} s{', FALLBACK ' + r['fallback'] if r.get('fallback') else ''})")
            elif r["what"] == "pipeline":
                lines.append(f"  pipeline inputs on {r['inputs_on']:<8} batch {r['batch']:>4}: {r['images_per_s']:>9,.0f}")
            else:
                lines.append(f"  host copy into pinned, {r['threads']} thread(s): {r['GB_per_s']} GB/s ({r['images_per_s']:,.0f} images/s)")
        lines.append("")
    pa = [r for r in records if r.get("what") == "perf_analyzer"]
    starts = {r["step"]: r["seconds"] for r in records if r.get("what") == "server_start"}
    if pa:
        lines.append("perf_analyzer 2.41, batch 1 per request (images/s = infer/s):")
        lines.append(f"  {'step':<18}{'shm':<8}{'conc':>5}{'images/s':>10}{'p50 ms':>8}{'p99 ms':>8}{'batch':>7}"
                     f"{'in us':>8}{'infer us':>9}  gpu busy %   (server start s)")
        for r in pa:
            if r["ok"]:
                rows.append(
                    f"  {r['step']:<18}{r['mode']:<8}{r['level']:>5}{r['images_per_s']:>10,.0f}{r['p50_ms']:>8.1f}{r['p99_ms']:>8.1f}"
                    f"{r.get('avg_batch') or 0:>7}{r.get('compute_input_us_per_req') or 0:>8.0f}{r.get('compute_infer_us_per_req') or 0:>9.0f}"
                    f"  {' '.join(f'{v:.0f}' for v in r['gpu_busy'].values()) or 'n/a':<11}  ({starts.get(r['step'], '?')})"
                )
            else:
                rows.append(f"  {r['step']:<18}{r['mode']:<8}{r['level']:>5}  {r['status']}")
        lines += rows
        for r in records:
            if r.get("what") == "server_start" and r.get("gpu_memory_used_mib"):
                lines.append(f"  {r['step']}: GPU memory in use after start, MiB per GPU: {r['gpu_memory_used_mib']}")
    failed = [r for r in records if r.get("status") and r.get("what") is None]
    for r in failed:
        lines.append(f"  {r['step']}: {r['status']}")
    return "\n".join(lines) + "\n"


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__,
        epilog="Fits: 1x or 2x H200, one device call: python -m bench model_speed all --budget-s 290 (forward, 1x,\n"
               "wire, 2x, then what fits; --budget-s 560 for every step). An A/B of server configs:\n"
               "  python -m bench model_speed all --serves 'c3:1x:3;c8:1x:8;n8:1x:8:mps=off' --modes cuda --levels 128,256\n"
               "On this box (no GPU): python -m bench model_speed all --cpu-check")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{all,forward,serve}")

    def pa_flags(p):
        p.add_argument("--window-ms", type=int, default=2000)
        p.add_argument("--stability", type=float, default=20.0)
        p.add_argument("--max-windows", type=int, default=5)

    a = sub.add_parser("all", help="every step in turn, then the table")
    a.add_argument("--out", default="", help="default $OUT or .bench-out/")
    a.add_argument("--budget-s", type=float, default=300.0, help="the whole run; later steps are skipped past it")
    a.add_argument("--steps", default="", help="only these steps (forward, compile, serve, wire or full names)")
    a.add_argument("--variants", default="1x,2x")
    a.add_argument("--counts", default="2,1,3", help="instances per GPU to try (2 is the shipped config)")
    a.add_argument("--modes", default="", help="perf_analyzer --shared-memory modes (default none,system,cuda)")
    a.add_argument("--levels", default="", help="concurrency levels (default 64,256)")
    a.add_argument("--compile-batches", default="64,128")
    a.add_argument("--compile-timeout-s", type=float, default=100.0)
    a.add_argument("--serves", default="",
                   help="only these serve steps: 'name:variant:count[:key=value,...];...' (an A/B of configs)")
    a.add_argument("--cpu-check", action="store_true", help="no GPU: vit_tiny CPU variant and the wire, small levels")
    pa_flags(a)

    f = sub.add_parser("forward", help="in-process forward speed on GPU 0")
    f.add_argument("--out", default="", help="default $OUT or .bench-out/")
    f.add_argument("--arch", default="openclip_vit_b32")
    f.add_argument("--modes", default="check,eager,graph,pipeline,copy")
    f.add_argument("--batches", default="16,32,64,128")
    f.add_argument("--seconds", type=float, default=1.5)
    f.add_argument("--step-name", default="forward")

    s = sub.add_parser("serve", help="one server, perf_analyzer per shared-memory mode and level")
    s.add_argument("--out", default="", help="default $OUT or .bench-out/")
    s.add_argument("--model", default="openclip_vit_b32")
    s.add_argument("--variant", default="1x")
    s.add_argument("--count", default="", help="instances per GPU (default: the config's)")
    s.add_argument("--modes", default="none,system,cuda")
    s.add_argument("--levels", default="64,256")
    s.add_argument("--wire-elements", type=int, default=VIT_ITEM, help="the wire model's FP32 values per item")
    s.add_argument("--budget-s", type=float, default=150.0)
    s.add_argument("--start-timeout-s", type=float, default=150.0)
    s.add_argument("--step-name", default="serve")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config change in the copy (model parameter, max_queue_delay_microseconds, preferred_batch_size)")
    pa_flags(s)

    v = sub.add_parser("server")  # internal: tui.cli server on a repository copy
    v.add_argument("--root", required=True)
    v.add_argument("--model", required=True)
    v.add_argument("--variant", required=True)
    v.add_argument("--mps", default="auto", choices=("auto", "on", "off"))
    return parser


def run(args: argparse.Namespace) -> int:
    if args.command != "server":
        args.out = str(Path(args.out).resolve() if args.out else out_dir())
        (Path(args.out) / "logs").mkdir(parents=True, exist_ok=True)
    return {"all": cmd_all, "forward": cmd_forward, "serve": cmd_serve, "server": cmd_server}[args.command](args)
