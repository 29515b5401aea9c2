"""Where the CPU goes while the embedded ViT serves (issue 14: why cuda_shm stops near 9k images/s
on one H200 with the GPU 55-75 % busy).

One embedded server (the shipped config, or --count / --set changes through gpu_model_speed.py's
repository copy), perf_analyzer 2.41 at one level per transport, and while it runs:
  * host CPU busy (/proc/stat) and the cores each process / thread kind uses (/proc/<pid>/task),
    for the server's process tree and perf_analyzer, so "CPU-bound" is a number, not a guess;
  * Triton's per-request queue / compute_input / compute_infer / compute_output and batch size;
  * py-spy (carried in .wheels/py-spy/) on one Python-backend stub: where its time goes, as
    self and inclusive shares of the samples (py-spy's raw stacks are kept too).

    python3 bench/gpu_cpu_profile.py --out $OUT [--cases cuda:128,none:256] [--count 3] [--set k=v]

Results: $OUT/cpu_profile.jsonl, $OUT/cpu_profile.txt (the summary), $OUT/pyspy_*.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import gpu_model_speed as gms  # noqa: E402  - the bench's server, perf_analyzer and stats helpers

PYSPY = HERE.parent / ".wheels" / "py-spy" / "py-spy"
TICK = os.sysconf("SC_CLK_TCK")


# ----------------------------------------------------------------------------- /proc sampling


def _stat_fields(path: Path) -> list[str] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    # the comm field may hold spaces and parentheses: split after its last ')'
    return text[text.rindex(")") + 2 :].split()


def _comm(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return "?"


def descendants(root: int) -> list[int]:
    """root and every process below it (by parent pid), from /proc."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(entry / "stat")):
            children[int(fields[1])].append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def thread_ticks(pids: list[int]) -> dict[int, tuple[str, str, int]]:
    """tid -> (process name, thread kind, utime + stime ticks)."""
    out = {}
    for pid in pids:
        pname = _comm(Path(f"/proc/{pid}/comm"))
        for task in Path(f"/proc/{pid}/task").glob("*"):
            fields = _stat_fields(task / "stat")
            if fields:
                kind = re.sub(r"[\d_-]+$", "", _comm(task / "comm")) or "?"
                out[int(task.name)] = (pname, kind, int(fields[11]) + int(fields[12]))
    return out


def host_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole host."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def cores_by_group(a: dict, b: dict, seconds: float) -> dict[str, float]:
    """Cores used per 'process/thread kind' between two thread_ticks snapshots."""
    used: Counter[str] = Counter()
    for tid, (pname, kind, ticks) in b.items():
        used[f"{pname}/{kind}"] += (ticks - a.get(tid, (pname, kind, 0))[2]) / TICK / seconds
    return {k: round(v, 2) for k, v in used.most_common() if v >= 0.02}


# ----------------------------------------------------------------------------- py-spy


def summarize_raw(path: Path, top: int = 25) -> dict:
    """Self and inclusive shares of py-spy's raw (collapsed) stacks."""
    self_c: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        total += n
        self_c[frames[-1]] += n
        for frame in set(frames):
            incl[frame] += n
    share = lambda c: [(f, round(100 * v / total, 1)) for f, v in c.most_common(top)]  # noqa: E731
    return {"samples": total, "self": share(self_c), "inclusive": share(incl)} if total else {"samples": 0}


def pyspy(pid: int, seconds: float, out: Path) -> subprocess.Popen | None:
    if not PYSPY.exists():
        return None
    cmd = [str(PYSPY), "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "200",
           "--format", "raw", "--output", str(out), "--nonblocking"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


# ----------------------------------------------------------------------------- one case


def run_case(args, server: gms.Server, binary: Path, env: dict, mode: str, level: int, out: Path) -> dict:
    csv_path = out / f"pa_{mode}_c{level}.csv"
    cmd = gms.pa_command(binary, server.url, args.model, level, mode, 3000, 15, 6, csv_path)
    before = gms.model_stats(server.url, args.model)
    pa = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    time.sleep(args.warmup_s)
    tree = descendants(server.proc.pid)
    stubs = [p for p in tree if _comm(Path(f"/proc/{p}/comm")).startswith("triton_python")]
    spy_out = out / f"pyspy_{mode}_c{level}.txt"
    spy = pyspy(stubs[0], args.sample_s, spy_out) if stubs else None
    t0, ha, ta = time.monotonic(), host_ticks(), thread_ticks(tree + [pa.pid])
    with gms.GpuBusy() as busy:
        time.sleep(args.sample_s)
    seconds = time.monotonic() - t0
    hb, tb = host_ticks(), thread_ticks(tree + [pa.pid])
    spy_text = spy.communicate(timeout=60)[0] if spy else "py-spy not carried"
    try:
        pa_text = pa.communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        pa.kill()
        pa_text = pa.communicate()[0] + "\nTIMEOUT"
    (out / f"pa_{mode}_c{level}.log").write_text(" ".join(cmd) + "\n" + pa_text)
    stats = gms.stats_delta(before, gms.model_stats(server.url, args.model))
    thr = re.findall(r"Throughput: ([\d.]+) infer/sec", pa_text)  # none when perf_analyzer did not stabilise
    groups = cores_by_group(ta, tb, seconds)
    record = {
        "mode": mode, "level": level, "pa_infer_per_s": float(thr[-1]) if thr else None,
        "host_busy_pct": round(100 * (hb[0] - ha[0]) / max(1, hb[1] - ha[1]), 1), "host_cores": os.cpu_count(),
        "cores": groups, "gpu_busy": busy.means(), "stubs": len(stubs), **stats,
        "pyspy": ({**summarize_raw(spy_out), "expected": int(200 * args.sample_s)} if spy_out.exists()
                  else {"error": spy_text.strip()[-300:]}),
    }
    return record


def render(records: list[dict]) -> str:
    lines = []
    for r in records:
        lines.append(f"== {r['mode']} c={r['level']}: perf_analyzer {r['pa_infer_per_s']} infer/s, host CPU "
                     f"{r['host_busy_pct']} % of {r['host_cores']} cores, GPU busy {r['gpu_busy']}, "
                     f"batch {r.get('avg_batch')}, per request us: queue {r.get('queue_us_per_req')} "
                     f"input {r.get('compute_input_us_per_req')} infer {r.get('compute_infer_us_per_req')} "
                     f"output {r.get('compute_output_us_per_req')}")
        lines.append("   cores by process/thread kind: " + ", ".join(f"{k} {v}" for k, v in r["cores"].items()))
        spy = r["pyspy"]
        if spy.get("samples"):
            lines.append(f"   one stub, py-spy {spy['samples']} of {spy['expected']} samples in Python (the rest: "
                         "idle, or the stub's C++ outside Python); self % of those:")
            lines += [f"      {p:5.1f}  {f}" for f, p in spy["self"][:15]]
            lines.append("   inclusive %:")
            lines += [f"      {p:5.1f}  {f}" for f, p in spy["inclusive"][:25]]
        else:
            lines.append(f"   py-spy: {spy}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="openclip_vit_b32", help="vit_tiny with --variant cpu on a CPU box")
    parser.add_argument("--variant", default="1x")
    parser.add_argument("--count", default="", help="instances per GPU (default: the config's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cases", default="cuda:128,none:256", help="perf_analyzer shm mode:level, ...")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--sample-s", type=float, default=8.0)
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    from bench.load_pa_setup import ensure_perf_analyzer

    binary, env = ensure_perf_analyzer()
    records = []
    with tempfile.TemporaryDirectory(prefix="gcp-") as tmp:
        root = gms.make_root(Path(tmp), args.model, int(args.count) if args.count else None, args.set)
        server = gms.Server(out, "profile", root, args.model, args.variant, 150)
        try:
            for case in args.cases.split(","):
                mode, level = case.split(":")
                record = run_case(args, server, binary, env, mode, int(level), out)
                records.append(record)
                with open(out / "cpu_profile.jsonl", "a") as f:
                    f.write(json.dumps(record) + "\n")
        finally:
            server.stop()
    text = render(records)
    (out / "cpu_profile.txt").write_text(text)
    print(text, flush=True)
    return 0 if records and all(r["pa_infer_per_s"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
