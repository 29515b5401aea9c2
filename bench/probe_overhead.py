"""Does the probe's instrumentation cost throughput? The probe's samples/s against a bare DDP
loop written here (same model, batch, steps, ranks, threads), alternated in one run.

The bare loop is what a user would time by hand: warm up, synchronise, run every step
back to back, synchronise, divide. The probe adds a barrier and a synchronisation between
runs (outside its timed windows), a 10 Hz NVML sampler thread on GPUs, and its bookkeeping.
Trials alternate probe / bare so that drift on a shared machine hits both alike.

    python -m bench probe_overhead                       # CPU here: 2 gloo ranks, mlp_258k
    python -m bench probe_overhead --device cuda --world-size 4 --model mlp_6.9m --batch 128 --trials 3

Prints each trial, then probe / bare as the geometric mean of the alternated pairs with its
95 % CI: exit 0 (PASS) when the whole CI is above 0.97, 1 (FAIL) when it is all below,
2 (INCONCLUSIVE) when it contains 0.97.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time

LIMIT = 0.03


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- the bare loop


def bare_rank(args: argparse.Namespace) -> None:
    """One rank of the hand-written DDP loop (run as a subprocess of this script)."""
    from engine.probe.worker import FORCED_ENV

    os.environ.update(FORCED_ENV)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from engine.probe.models import build_model

    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    cuda = args.device == "cuda"
    torch.set_num_threads(args.threads)
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    torch.manual_seed(1234 + rank)
    pm = build_model(args.model)
    model = DDP(pm.module.to(device), device_ids=[local] if cuda else None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = pm.make_batch(args.batch, device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = pm.loss_fn(model(x), y)
        loss.backward()
        opt.step()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    for _ in range(max(1, args.warmup)):
        step()
    sync()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps * args.repeats):
        step()
    sync()
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        samples = args.batch * world * args.steps * args.repeats
        print(json.dumps({"samples_per_s": samples / float(elapsed.item())}), flush=True)
    dist.destroy_process_group()


def run_bare(args: argparse.Namespace) -> float:
    port = _free_port()
    procs = []
    for rank in range(args.world_size):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.world_size),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS=str(args.threads))
        cmd = [sys.executable, "-m", "bench", "probe_overhead", "--bare-rank", "--device", args.device, "--model", args.model,
               "--batch", str(args.batch), "--steps", str(args.steps), "--repeats", str(args.repeats),
               "--warmup", str(args.warmup), "--precision", args.precision, "--threads", str(args.threads)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
    try:
        outs = [p.communicate(timeout=args.timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(p.returncode for p in procs):
        raise SystemExit(f"bare loop failed: exit codes {[p.returncode for p in procs]}")
    return float(json.loads(outs[0].strip().splitlines()[-1])["samples_per_s"])


# --------------------------------------------------------------------------- the probe


def run_probe_once(args: argparse.Namespace) -> float:
    from engine.events import Error
    from engine.probe.orchestrate import run_probe
    from engine.profiles import Probe

    settings = Probe(models=[args.model], strategies=["ddp"], batch_sizes=[args.batch], world_sizes=[args.world_size],
                     scaling=["weak"], steps=args.steps, warmup_steps=args.warmup, repeats=args.repeats,
                     precision=args.precision, timeout_s=args.timeout)
    errors: list[str] = []
    results = run_probe(settings, lambda e: errors.append(e.message) if isinstance(e, Error) else None,
                        threading.Event(), device=args.device)
    if errors or not results:
        raise SystemExit(f"probe failed: {errors}")
    # the probe's figure is the mean of its runs (outliers removed): what a user reads
    return results[0].samples_per_s.mean


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0],
        epilog="Fits: CPU here (2 gloo ranks, a few minutes), or 4 GPUs in about 2 minutes:\n"
               "  python -m bench probe_overhead --device cuda --world-size 4 --model mlp_6.9m --batch 128 --repeats 5 --trials 3\n"
               "Exit 0 PASS (the whole 95 % CI of probe / bare above 0.97), 1 FAIL (all below), 2 INCONCLUSIVE.")
    p.add_argument("--bare-rank", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--model", default="mlp_258k")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="per device")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    p.add_argument("--trials", type=int, default=6, help="probe/bare pairs, alternated")
    p.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)  # bare ranks: the probe's cores / ranks
    p.add_argument("--timeout", type=float, default=300.0)
    return p


def run(args: argparse.Namespace) -> int:
    if not args.threads:
        args.threads = max(1, (os.cpu_count() or 1) // args.world_size)
    if args.bare_rank:
        bare_rank(args)
        return 0

    from scipy import stats as scipy_stats

    from engine.analysis.stats import is_significant, mean_ci, summarize, welch_t_test

    print(f"{args.model}, {args.world_size} ranks on {args.device}, batch {args.batch}/rank, "
          f"{args.steps} steps x {args.repeats} runs, {args.precision}, {args.threads} thread(s)/rank")
    probe, bare = [], []
    for trial in range(args.trials):
        order = (("probe", run_probe_once, probe), ("bare", run_bare, bare))
        for name, fn, sink in (order if trial % 2 == 0 else order[::-1]):
            sink.append(fn(args))
            print(f"  trial {trial + 1} {name:5s} {sink[-1]:12,.1f} samples/s", flush=True)
    ps, bs = summarize(probe), summarize(bare)
    test = welch_t_test(probe, bare)
    p_text = "-" if test is None else f"{test.p_value:.3g}" + ("" if is_significant(test.p_value) else " (not significant)")
    print(f"probe {ps.mean:,.1f} samples/s (n={ps.n}), bare DDP loop {bs.mean:,.1f} (n={bs.n}); Welch p = {p_text}")
    # alternated pairs share the machine's drift: judge on the per-pair ratios (log scale)
    logs = [math.log(a / b) for a, b in zip(probe, bare, strict=False)]
    mean_log, low, high = mean_ci(logs)
    ratio = math.exp(mean_log)
    paired_p = float(scipy_stats.ttest_1samp(logs, 0.0).pvalue) if len(logs) > 1 else None
    print(f"probe / bare = {ratio:.4f} (geometric mean of {len(logs)} pairs, 95 % CI "
          f"{_fmt(low)} .. {_fmt(high)}; paired t-test against 1: p = {_fmt_p(paired_p)})")
    print(f"instrumentation cost {100 * (1 - ratio):+.2f} % (limit {100 * LIMIT:.0f} %)")
    if low is not None and math.exp(low) >= 1 - LIMIT:
        print("PASS: the whole 95 % CI of probe / bare is above 0.97")
        return 0
    if high is not None and math.exp(high) < 1 - LIMIT:
        print("FAIL: the whole 95 % CI of probe / bare is below 0.97")
        return 1
    print("INCONCLUSIVE: the 95 % CI contains 0.97; more trials or a quieter machine")
    return 2


def _fmt(log_value: float | None) -> str:
    return "-" if log_value is None else f"{math.exp(log_value):.4f}"


def _fmt_p(p: float | None) -> str:
    return "-" if p is None else f"{p:.3g}"
