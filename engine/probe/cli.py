"""`python -m engine.probe`: the training probe without the TUI (a GPU box, CI, torchrun).

    python -m engine.probe --models mlp_258k,mlp_6.9m,transformer --world-sizes 1,2,4 \\
        --batch-sizes 32,128 --steps 50 --repeats 5 --precision bf16 --allreduce --jsonl OUT.jsonl \\
        --dataset-size 1281167 --cost-per-hour 12

Progress goes to stderr, the tables to stdout at the end (the training bill among them), and
every event to --jsonl as one JSON line (event.to_dict()). Started by torchrun (multi-node), every process is one rank of
one world size: rank 0 prints and writes; --baseline names an earlier world-size-1 JSONL for
speedup and efficiency. Exit codes: 0 ok, 1 a configuration failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

from engine import format as fmt
from engine.errors import UserError
from engine.events import (
    AllReduceResult,
    Error,
    Event,
    PhaseChanged,
    ProbeResult,
    Warning,
    event_from_dict,
)
from engine.profiles import Probe, load_profile, profile_from_dict

SOURCE = "command line"
BILL_FLAGS = ("--dataset-size", "--cost-per-hour")  # what the bill's line asks for when one is missing


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _ints(text: str) -> list[int]:
    try:
        return [int(t) for t in _csv(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, found {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m engine.probe", description="Training probe: DDP/FSDP scaling and all-reduce bandwidth.")
    p.add_argument("--profile", help="start from this profile's [probe] section (flags override it)")
    p.add_argument("--models", type=_csv, help="built-in names (mlp_258k, mlp_6.9m, transformer, transformer_tiny) "
                   "or module:factory")
    p.add_argument("--strategies", type=_csv, help="ddp, fsdp (world size 1 always runs the plain model)")
    p.add_argument("--world-sizes", type=_ints)
    p.add_argument("--batch-sizes", type=_ints, help="per device (weak scaling) / global (strong scaling)")
    p.add_argument("--scaling", type=_csv, help="weak, strong")
    p.add_argument("--steps", type=int, help="measured steps per run")
    p.add_argument("--warmup-steps", type=int)
    p.add_argument("--repeats", type=int, help="runs per configuration")
    p.add_argument("--precision", help="fp32, bf16, fp16")
    p.add_argument("--timeout", type=float, dest="timeout_s", help="seconds without progress before a group is ended")
    p.add_argument("--allreduce", action="store_true", default=None, help="also sweep all-reduce sizes per world size")
    p.add_argument("--allreduce-max-bytes", type=int)
    p.add_argument("--dataset-size", type=int, help="samples per epoch: the time and $ per epoch at each world size")
    p.add_argument("--cost-per-hour", type=float, help="the box's price in $/hr (else the profile's "
                   "hardware.cost_per_hour; with a profile's gpu_count, fewer GPUs pay their share)")
    p.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    p.add_argument("--jsonl", type=Path, help="write every event here, one JSON object per line")
    p.add_argument("--baseline", type=Path, help="torchrun only: a JSONL with world-size-1 results to compare with")
    return p


def settings_from_args(args: argparse.Namespace) -> Probe:
    # without a profile the all-reduce sweep is opt-in (--allreduce), as the flag reads
    base = load_profile(args.profile).probe if args.profile else Probe(allreduce=False)
    data: dict[str, Any] = dataclasses.asdict(base)  # every field (vars() misses defaults kept on the class)
    for key in ("models", "strategies", "world_sizes", "batch_sizes", "scaling", "steps", "warmup_steps",
                "repeats", "precision", "timeout_s", "allreduce", "allreduce_max_bytes", "dataset_size"):
        value = getattr(args, key)
        if value is not None:
            data[key] = value
    data["enabled"] = True
    return profile_from_dict({"probe": data}, SOURCE).probe


def pricing_from_args(args: argparse.Namespace) -> tuple[float | None, int]:
    """The box's $/hr (the flag, else the profile's) and its GPU count (the profile's; 0: unknown)."""
    hardware = load_profile(args.profile).hardware if args.profile else None
    price = args.cost_per_hour if args.cost_per_hour is not None else hardware.cost_per_hour if hardware else None
    if price is not None and not (math.isfinite(price) and price >= 0):
        raise UserError(f"--cost-per-hour: expected a price in $/hr >= 0, found {args.cost_per_hour!r}")
    return price or None, hardware.gpu_count if hardware else 0


class Output:
    """Events to stderr (progress), to the JSONL file, and kept for the final tables (and the
    training bill, from the dataset size and the box's price)."""

    def __init__(self, jsonl: Path | None, stream: IO[str] = sys.stderr, dataset_size: int | None = None,
                 cost_per_hour: float | None = None, box_gpus: int = 0) -> None:
        self.bill_inputs = (dataset_size, cost_per_hour, box_gpus)
        self.stream = stream
        self.file = open(jsonl, "w", encoding="utf-8") if jsonl else None  # noqa: SIM115 - closed in close()
        self.events: list[Event] = []
        self.errors = 0
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)
            if self.file:
                self.file.write(json.dumps(event.to_dict()) + "\n")
                self.file.flush()
            if isinstance(event, PhaseChanged):
                print(f"[{event.phase}] {event.detail}", file=self.stream, flush=True)
            elif isinstance(event, Warning):
                print(f"warning: {event.message}", file=self.stream, flush=True)
            elif isinstance(event, Error):
                self.errors += 1
                print(f"error: {event.message}", file=self.stream, flush=True)
            elif isinstance(event, ProbeResult):
                s = event.samples_per_s
                print(f"  {event.model} {event.strategy} {event.scaling} N={event.world_size} "
                      f"b={event.per_device_batch}: {fmt.rate(s.mean)} samples/s", file=self.stream, flush=True)

    def close(self) -> None:
        if self.file:
            self.file.close()

    def tables(self) -> str:
        from engine.analysis.training_bill import training_bill
        from engine.probe.table import allreduce_table, bill_text, probe_table

        results = [e for e in self.events if isinstance(e, ProbeResult)]
        parts = [probe_table(results)]
        if results:
            dataset_size, price, box_gpus = self.bill_inputs
            parts.append(bill_text(training_bill(results, dataset_size, price, box_gpus, keys=BILL_FLAGS)))
        parts += [allreduce_table(e) for e in self.events if isinstance(e, AllReduceResult)]
        return "\n\n".join(parts)


def read_baselines(path: Path):
    from engine.probe.aggregate import Baselines

    baselines = Baselines()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"--baseline {path}: cannot read: {exc.strerror}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = event_from_dict(json.loads(line))
        except ValueError as exc:
            raise UserError(f"--baseline {path}:{n}: not an event line: {exc}") from None
        if isinstance(event, ProbeResult):
            baselines.add(event)
    return baselines


def _under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ and "RANK" in os.environ


def run_torchrun_rank(settings: Probe, args: argparse.Namespace, out: Output | None) -> None:
    """This process is one rank that torchrun started; rank 0 (out is not None) reports."""
    from engine.probe.aggregate import Baselines
    from engine.probe.jobs import AllReduceJob, Job, job_to_dict, plan_training
    from engine.probe.orchestrate import ResultCollector, resolve_device, validate_models
    from engine.probe.worker import force_env, init_rank, run_jobs

    force_env()
    device = resolve_device(args.device)
    validate_models(settings.models)
    world = int(os.environ["WORLD_SIZE"])
    plan, warnings = plan_training(settings, [world])
    jobs: list[Job] = list(plan.get(world, []))
    if settings.allreduce and world > 1:
        jobs.append(AllReduceJob(id=f"allreduce/ws{world}", world_size=world, max_bytes=settings.allreduce_max_bytes))
    baselines = read_baselines(args.baseline) if args.baseline else Baselines()
    ctx = init_rank(device, settings.timeout_s)
    publish = out if out is not None else (lambda event: None)
    for text in warnings:
        publish(Warning(source="probe", message=text))
    collector = ResultCollector(jobs, device, publish, baselines, world)

    def emit(record: dict[str, Any]) -> None:
        if record.get("type") == "job_start":
            collector.on_job_start(record["job"])
        elif record.get("type") == "result":
            collector.on_record(record)

    import torch.distributed as dist

    try:
        run_jobs([job_to_dict(j) for j in jobs], ctx, emit)
    finally:
        dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    code = _main(argv)
    if _under_torchrun():
        # Leave as the local worker does (engine/probe/worker.py): flush, then os._exit. A normal
        # exit runs torch's static destructors while C++ threads of gloo and the c10d store may
        # still be joinable; std::terminate then aborts a finished run ("terminate called
        # without an active exception", exit -6) about one run in five.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out: Output | None = None
    try:
        settings = settings_from_args(args)
        rank0 = not _under_torchrun() or os.environ.get("RANK") == "0"
        price, box_gpus = pricing_from_args(args)
        out = Output(args.jsonl, dataset_size=settings.dataset_size, cost_per_hour=price,
                     box_gpus=box_gpus) if rank0 else None
        if _under_torchrun():
            run_torchrun_rank(settings, args, out)
        else:
            if args.baseline:
                raise UserError("--baseline is for torchrun runs; a local run measures world size 1 itself")
            from engine.probe.orchestrate import run_probe

            stop = threading.Event()
            assert out is not None  # not under torchrun: this process is rank 0
            try:
                run_probe(settings, out, stop, device=args.device, include_allreduce=settings.allreduce)
            except KeyboardInterrupt:
                stop.set()
                print("interrupted", file=sys.stderr)
                return 130
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if out is not None:
            out.close()
    if out is not None:
        print(out.tables())
        return 1 if out.errors else 0
    return 0
