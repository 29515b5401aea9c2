"""`gpuscale-tui check`: gather the facts (NVML idle, a short load and bandwidth in a child
process, an all-reduce through the training probe's rank launcher, the host), judge them, and
return one BoxCheck event. Blocking; the Session calls it from an executor thread.

Under a minute on 4 GPUs: NVML reads take milliseconds; the child spends 1 s per GPU on
host-to-device copies, 3 s on a matmul burst, 0.5 s per pair on copies, plus torch's start;
the all-reduce group starts its ranks once and sweeps 1 KiB .. 256 MiB.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from engine.check.facts import BoxFacts, ExpectedHardware, GpuFacts, LoadSample
from engine.check.host_facts import read_host_facts
from engine.check.nvml_facts import read_idle_facts
from engine.check.verdicts import judge, overall
from engine.errors import missing_extra
from engine.events import BoxCheck, Error, Event, PhaseChanged, Warning
from engine.probe.worker import FORCED_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
MEASURE_TIMEOUT_S = 120.0  # torch import + CUDA init of every GPU + the copies, on a slow box
ALLREDUCE_MAX_BYTES = 256 << 20  # large enough for NCCL to approach the link on NVLink
ALLREDUCE_TIMEOUT_S = 60.0

Measurer = Callable[[], dict[str, Any]]
AllReducer = Callable[[int], tuple[float | None, int | None, str | None]]


def expected_from_profile(profile: Any) -> ExpectedHardware:
    return ExpectedHardware(profile=profile.name, **dataclasses.asdict(profile.hardware))


def run_measure_child(timeout_s: float = MEASURE_TIMEOUT_S) -> dict[str, Any]:
    """engine.check.measure in its own process group; {"error": why} when it cannot give a result."""
    env = dict(os.environ)
    env.update(FORCED_ENV)
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(REPO_ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]))
    proc = subprocess.Popen([sys.executable, "-m", "engine.check.measure"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"the measurements did not finish in {timeout_s:.0f} s (a hung GPU or driver?)"}
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (err.strip().splitlines() or ["no output"])[-1][:200]
        return {"error": f"the measurement process failed (exit {proc.returncode}): {tail}"}
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        return {"error": "the measurement process wrote no readable result"}


def run_allreduce(world_size: int, stop: threading.Event | None = None) -> tuple[float | None, int | None, str | None]:
    """(peak busbw GB/s, its size, why there is none) over NCCL, through the probe's launcher."""
    if missing := missing_extra("probe", "the all-reduce"):
        return None, None, missing
    from engine.events import AllReduceResult, Error
    from engine.probe.orchestrate import run_allreduce_sweep

    errors: list[str] = []

    def collect(event: Event) -> None:
        if isinstance(event, Error):
            errors.append(event.message)

    try:
        result = run_allreduce_sweep(world_size, collect, stop or threading.Event(), device="cuda",
                                     max_bytes=ALLREDUCE_MAX_BYTES, timeout_s=ALLREDUCE_TIMEOUT_S)
    except Exception as exc:  # UserError (torch sees no CUDA), a launcher failure
        return None, None, f"all-reduce did not run: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    if not isinstance(result, AllReduceResult) or not result.rows:
        return None, None, errors[0] if errors else "all-reduce gave no result"
    best = max(result.rows, key=lambda r: r.busbw_gbps)
    return best.busbw_gbps, best.size_bytes, None


def _load_sample(copy: dict[str, Any], compute: dict[str, Any]) -> LoadSample:
    def top(key: str) -> Any:
        values = [d[key] for d in (copy, compute) if d.get(key) is not None]
        return max(values) if values else None

    bits = [d["throttle_reasons"] for d in (copy, compute) if d.get("throttle_reasons") is not None]
    throttle = 0
    for b in bits:
        throttle |= int(b)
    gen, width = top("pcie_gen"), top("pcie_width")
    return LoadSample(pcie_gen=int(gen) if gen is not None else None, pcie_width=int(width) if width is not None else None,
                      throttle_reasons=throttle if bits else None, temp_c_max=top("temp_c_max"),
                      power_w_max=top("power_w_max"), sm_clock_mhz_max=top("sm_clock_mhz_max"))


def merge_measurements(facts: BoxFacts, measured: dict[str, Any]) -> list[GpuFacts]:
    """Put the child's figures on the NVML facts, matched by UUID (torch's numbering follows
    CUDA_VISIBLE_DEVICES, NVML's does not). Returns the GPUs the child could use."""
    if "error" in measured:
        facts.measure_error = str(measured["error"])
        return []
    by_uuid = {g.uuid: g for g in facts.gpus}
    torch_to_gpu: dict[int, GpuFacts] = {}
    for m in measured.get("gpus", []):
        g = by_uuid.get(m.get("uuid", ""))
        if g is None:
            continue
        torch_to_gpu[int(m["index"])] = g
        g.load = _load_sample(m.get("copy_load") or {}, m.get("compute_load") or {})
        if m.get("h2d_gbps") is not None:
            facts.h2d_gbps[g.index] = float(m["h2d_gbps"])
    pairs = {(p.a, p.b): p for p in facts.pairs}
    for m in measured.get("pairs", []):
        a, b = torch_to_gpu.get(int(m["a"])), torch_to_gpu.get(int(m["b"]))
        if a is None or b is None:
            continue
        pair = pairs.get((min(a.index, b.index), max(a.index, b.index)))
        if pair is not None and m.get("d2d_gbps") is not None:
            pair.d2d_gbps = float(m["d2d_gbps"])
    if not torch_to_gpu:
        facts.measure_error = "the GPUs torch sees could not be matched to NVML's (by UUID)"
    return list(torch_to_gpu.values())


def run_check(
    expected: ExpectedHardware,
    record_dir: Path = Path("recordings"),
    *,
    measure: bool = True,
    allreduce: bool = True,
    nvml: Any = None,
    measurer: Measurer | None = None,
    allreducer: AllReducer | None = None,
    progress: Callable[[str], None] = lambda text: None,
    stop: threading.Event | None = None,
) -> BoxCheck:
    """The whole check. ``nvml``/``measurer``/``allreducer``: stand-ins for unit tests."""
    start = time.monotonic()
    progress("reading the host and the GPUs (NVML)")
    host = read_host_facts(record_dir)
    idle = read_idle_facts(nvml)
    gpus, nvml_error = idle.gpus, idle.error
    facts = BoxFacts(host=host, expected=expected, gpus=gpus, pairs=idle.pairs, nvml_error=nvml_error,
                     machine_gpus=idle.machine_gpus, cuda_visible=idle.cuda_visible, visible_unknown=idle.unknown)
    usable: list[GpuFacts] = []
    if gpus and measure:
        progress("short load and bandwidth on every GPU")
        usable = merge_measurements(facts, (measurer or run_measure_child)())
    elif gpus:
        facts.measure_error = "skipped (--quick): idle readings only"
    if len(gpus) > 1:
        if not allreduce or not measure:
            facts.allreduce_skipped = "skipped" + (" (--quick)" if not measure else "")
        elif len(usable) < 2:
            facts.allreduce_error = facts.measure_error or "fewer than 2 GPUs usable by torch"
        elif stop is not None and stop.is_set():
            facts.allreduce_skipped = "stopped"
        else:
            progress(f"all-reduce on {len(usable)} GPUs (NCCL)")
            busbw, size, error = (allreducer or (lambda n: run_allreduce(n, stop)))(len(usable))
            facts.allreduce_busbw_gbps, facts.allreduce_bytes, facts.allreduce_error = busbw, size, error
    items = judge(facts)
    verdict, line = overall(items, len(gpus), nvml_error)
    return BoxCheck(verdict=verdict, summary=line, items=items, gpus=len(gpus), facts=facts.to_dict(),
                    duration_s=time.monotonic() - start)


def publish_progress(publish: Callable[[Event], None]) -> Callable[[str], None]:
    return lambda text: publish(PhaseChanged(phase="box check", detail=text))


async def check_before_run(expected: ExpectedHardware, record_dir: Path, publish: Callable[[Event], None], *,
                           allreduce: bool, stop: threading.Event, taken: BoxCheck | None = None) -> None:
    """A session's check of its box, in a thread: published (recorded, shown), and a no-go said
    loudly; it never stops the session (the user chose to run; the recording says what the box
    was). ``taken``: a check already taken (a study's): the box has not changed since."""
    if taken is not None:
        result = msgspec.structs.replace(taken, ts=time.time())
    else:
        publish(PhaseChanged(phase="box check", detail="is this box fit for the run"))
        try:
            result = await asyncio.get_running_loop().run_in_executor(None, lambda: run_check(
                expected, record_dir, allreduce=allreduce, progress=publish_progress(publish), stop=stop))
        except Exception as exc:  # the check informs the run; it must never be why it failed
            publish(Warning(source="check", key="check-failed", message=f"box check did not run: {exc!r}"))
            return
    publish(result)
    if result.verdict == "no-go":
        publish(Error(source="check", message=result.summary))
    elif result.verdict == "warn":
        publish(Warning(source="check", key="check-warn", message=result.summary))
