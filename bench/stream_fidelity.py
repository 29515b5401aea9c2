"""Streaming fidelity: our grpc_stream against perf_analyzer 2.41 ``-i grpc --streaming`` on the embedded toy_llm, per level; with --aiperf, AIPerf 0.13 beside them.

One embedded server; at each level the tools run in turn, the order rotating each round, with the
same prompts and every answer checked:

- perf_analyzer (``-i grpc --streaming``): the prompts' input-data JSON with ``validation_data``
  (the last response of each request must carry INDEX = MAX_TOKENS - 1, as perf_analyzer checks
  a stream's last response); its figures from its ``--profile-export-file`` (per request the send
  time and each response's time give TTFT, the gaps (ITL) and the latency to the last response;
  its throughput is the requests whose last response fell inside its measurement windows over
  their span).
- ours over grpc_stream, the same file (every response checked; the last one's values against the
  validation data).
- with ``--aiperf PATH``: AIPerf speaks only HTTP (no gRPC transport, no KServe endpoint type), so
  it drives Triton's generate extension (``/v2/models/toy_llm/generate_stream``, server-sent
  events) through its ``template`` endpoint, and ours over generate_stream runs beside it: the
  pair to compare. AIPerf's TTFT and throughput are its own summary's; ITL and the latency come
  from its raw records (each response's time), every response checked there (INDEX its position,
  TOKEN a word, MAX_TOKENS of them, HTTP 200).

Prints each run, then per level the median over rounds of each tool against its reference
(ours/perf_analyzer over gRPC; AIPerf/ours over HTTP) with the spread (min-max of the per-round
ratios), the server's CPU and its threads' context switches per request it served under each
tool (its process group's over the run, over Triton's count of requests served: a server short
of cores serves faster a client whose traffic costs it less), and each tool's own spread between
rounds; the rows go to $OUT (or .bench-out/) as JSON.

    python -m bench stream_fidelity --levels 1 8 32 --rounds 3 --server-cpus 0 --client-cpus 1 \\
        [--aiperf .aiperf-venv/bin/aiperf]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ("Tell me a story about a lighthouse.", "What is the capital of France?",
           "Write a haiku about load testing.", "Explain decoupled models in one line.")
FIGURES = ("rps", "p50", "ttft50", "itl50")
# toy_llm's words (model_repository/embedded/toy_llm/1/model.py): each response's TOKEN is one
WORDS = frozenset(("the", "a", "model", "token", "stream", "of", "and", "to", "in", "load", "server",
                   "answer", "is", "one", "each", "step", "word", "time", "first", "next"))


def last_words(grpc_url: str, tokens: int) -> list[str]:
    """Each prompt's last word, as the server answers it alone before any load (the model is
    deterministic: every answer under load must be the same)."""
    import grpc

    from engine.triton.transports.grpc import messages

    pb = messages()
    words = []
    with grpc.insecure_channel(grpc_url) as channel:
        infer = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer", request_serializer=None,
                                      response_deserializer=pb.ModelStreamInferResponse.FromString)
        for prompt in PROMPTS:
            request = pb.ModelInferRequest(model_name="toy_llm")
            request.inputs.add(name="PROMPT", datatype="BYTES", shape=[1])
            request.inputs.add(name="MAX_TOKENS", datatype="INT32", shape=[1])
            request.raw_input_contents.extend([len(prompt).to_bytes(4, "little") + prompt.encode(),
                                               tokens.to_bytes(4, "little")])
            replies = list(infer(iter([request.SerializeToString()]), timeout=60))
            if any(r.error_message for r in replies) or len(replies) != tokens:
                raise RuntimeError(f"toy_llm answered {prompt!r} with {len(replies)} responses, not {tokens}: "
                                   f"{[r.error_message for r in replies if r.error_message][:1]}")
            raw = replies[-1].infer_response.raw_output_contents[0]
            words.append(raw[4:].decode())
    return words


def prompts_file(folder: Path, tokens: int, words: list[str]) -> Path:
    """perf_analyzer's input-data JSON: the prompts, MAX_TOKENS each, and as validation data what
    their last response must carry (the word the server answered alone, INDEX = MAX_TOKENS - 1).
    Both outputs: perf_analyzer 2.41 crashes (SIGSEGV) on validation data naming only one."""
    path = folder / "toy_llm_prompts.json"
    path.write_text(json.dumps({
        "data": [{"PROMPT": [p], "MAX_TOKENS": [tokens]} for p in PROMPTS],
        "validation_data": [{"TOKEN": [w], "INDEX": [tokens - 1]} for w in words],
    }))
    return path


def figures(ttft_ns: list[int], latency_ns: list[int], gaps_ns: list[int], rps: float) -> dict[str, float]:
    import numpy as np

    return {"rps": rps, "p50": float(np.percentile(latency_ns, 50)) / 1e6,
            "ttft50": float(np.percentile(ttft_ns, 50)) / 1e6, "itl50": float(np.percentile(gaps_ns, 50)) / 1e6}


def theirs(pa: Path, env: dict[str, str], grpc_url: str, level: int, data: Path, export: Path,
           args: argparse.Namespace) -> dict[str, Any]:
    interval_ms, tokens = args.interval_ms, args.tokens
    cmd = [str(pa), "-m", "toy_llm", "-i", "grpc", "--streaming", "-u", grpc_url, "--input-data", str(data),
           "--concurrency-range", str(level), "--measurement-interval", str(interval_ms),
           "--stability-percentage", f"{args.stability:g}", "--max-trials", str(args.max_windows),
           "--profile-export-file", str(export)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if run.returncode != 0:  # a wrong last response (validation data) fails the run too
        raise RuntimeError(f"perf_analyzer failed: {(run.stdout + run.stderr)[-400:]}")
    experiment = json.loads(export.read_text())["experiments"][-1]
    reqs = [r for r in experiment["requests"] if r.get("response_timestamps")]
    short = sum(1 for r in reqs if len(r["response_timestamps"]) != tokens)
    if short:
        raise RuntimeError(f"perf_analyzer: {short} of {len(reqs)} requests without {tokens} responses")
    bounds = experiment["window_boundaries"]
    inside = [r for r in reqs if bounds[0] <= r["response_timestamps"][-1] <= bounds[-1]]
    gaps = [b - a for r in reqs for a, b in zip(r["response_timestamps"][:-1], r["response_timestamps"][1:], strict=True)]
    return figures([r["response_timestamps"][0] - r["timestamp"] for r in reqs],
                   [r["response_timestamps"][-1] - r["timestamp"] for r in reqs], gaps,
                   len(inside) / ((bounds[-1] - bounds[0]) / 1e9)) | {"requests": len(reqs)}


def ours(target: Any, info: Any, level: int, data: Path, args: argparse.Namespace, transport: str,
         workers: int = 0) -> dict[str, Any]:
    from engine.load.sweep import run_sweep
    from engine.profiles import Load
    from engine.triton.api import TritonApi

    tokens = args.tokens
    load = Load(concurrency=[level], transport=transport, input_data=str(data), window_ms=args.interval_ms,
                stability_percent=args.stability, warmup_s=1.0, max_windows=args.max_windows, workers=workers)
    (result,) = asyncio.run(run_sweep(TritonApi(target, info), load, lambda e: None, asyncio.Event()))
    if result.stream is None or result.errors or result.status == "failed":
        raise RuntimeError(f"our level {level} ended {result.status} with {result.errors} errors "
                           f"{result.errors_by_kind} {result.error_messages[:2]}")
    if result.stream.responses_per_request != tokens:
        raise RuntimeError(f"our level {level}: {result.stream.responses_per_request} responses per request, not {tokens}")
    ttft, itl = result.stream.ttft.p50, result.stream.itl.p50
    if ttft is None or itl is None:
        raise RuntimeError(f"our level {level}: no TTFT or ITL")
    audit = result.audit  # is our loop busy enough to read responses late?
    return {"rps": result.throughput_rps, "p50": (result.latency.p50 or 0.0) * 1e3, "ttft50": ttft * 1e3, "itl50": itl * 1e3,
            "status": result.status, "requests": result.requests, "client_cpu_percent": audit.cpu_percent,
            "loop_lag_p99_ms": audit.loop_lag_p99 * 1e3 if audit.loop_lag_p99 is not None else None}


def aiperf_setup(folder: Path, aiperf: Path, tokens: int) -> dict[str, Path]:
    """AIPerf's inputs: the prompts (single_turn JSONL), the request body's template, and a local
    word-level tokenizer (AIPerf loads one; its built-in one downloads its vocabulary)."""
    (folder / "prompts.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in PROMPTS))
    (folder / "template.json").write_text('{"PROMPT": {{ text|tojson }}, "MAX_TOKENS": ' + str(tokens) + '}')
    make = ("import json, sys\nfrom tokenizers import Tokenizer, models, pre_tokenizers\n"
            "words = sorted(set(sys.argv[2:]))\n"
            "t = Tokenizer(models.WordLevel({'[UNK]': 0, **{w: i + 1 for i, w in enumerate(words)}}, unk_token='[UNK]'))\n"
            "t.pre_tokenizer = pre_tokenizers.Whitespace()\nt.save(sys.argv[1] + '/tokenizer.json')\n"
            "open(sys.argv[1] + '/tokenizer_config.json', 'w').write(json.dumps("
            "{'tokenizer_class': 'PreTrainedTokenizerFast', 'unk_token': '[UNK]'}))\n")
    (folder / "tokenizer").mkdir(exist_ok=True)
    python = aiperf.parent / "python"
    words = sorted(WORDS | {w.strip(".?").lower() for p in PROMPTS for w in p.split()})
    run = subprocess.run([str(python), "-c", make, str(folder / "tokenizer"), *words], capture_output=True, text=True,
                         timeout=120)
    if run.returncode != 0:
        raise RuntimeError(f"AIPerf's tokenizer: {run.stderr.strip()[-300:]}")
    return {"prompts": folder / "prompts.jsonl", "template": folder / "template.json", "tokenizer": folder / "tokenizer"}


def response_problem(events: list[dict[str, Any]], tokens: int, last_word: str | None) -> str | None:
    """One AIPerf record's responses against toy_llm's answer: MAX_TOKENS events, each INDEX its
    position and TOKEN one of the model's words, the last one the word the prompt gets alone."""
    if len(events) != tokens:
        return f"{len(events)} responses, not {tokens}"
    for i, event in enumerate(events):
        if event.get("INDEX") != i or event.get("TOKEN") not in WORDS:
            return f"response {i}: {json.dumps(event)[:80]}"
    if events[-1].get("TOKEN") != last_word:
        return f"last word {events[-1].get('TOKEN')!r}, expected {last_word!r}"
    return None


def aiperf_run(aiperf: Path, inputs: dict[str, Path], http_url: str, level: int, seconds: float, out: Path,
               tokens: int, last: dict[str, str]) -> dict[str, Any]:
    cmd = [str(aiperf), "profile", "-m", "toy_llm", "--url", http_url, "--endpoint-type", "template",
           "--custom-endpoint", "/v2/models/toy_llm/generate_stream", "--streaming",
           "--extra-inputs", f"payload_template:{inputs['template']}", "--extra-inputs", "response_field:TOKEN",
           "--input-file", str(inputs["prompts"]), "--custom-dataset-type", "single_turn",
           "--tokenizer", str(inputs["tokenizer"]), "--concurrency", str(level),
           "--warmup-request-count", str(max(20, 4 * level)), "--benchmark-duration", f"{seconds:g}",
           "--export-level", "raw", "--artifact-dir", str(out), "--ui-type", "none"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    summary_path = out / "profile_export_aiperf.json"
    if run.returncode != 0 or not summary_path.exists():
        raise RuntimeError(f"AIPerf failed: {(run.stdout + run.stderr)[-400:]}")
    summary = json.loads(summary_path.read_text())
    ttft, latency, gaps, problems, errors = [], [], [], [], 0
    for line in (out / "profile_export_raw.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("metadata", {}).get("benchmark_phase") != "profiling":
            continue
        if record.get("status") != 200 or record.get("error"):
            errors += 1
            continue
        times = [r["perf_ns"] for r in record["responses"]]
        events = [json.loads(p["value"]) for r in record["responses"] for p in r["packets"] if p.get("name") == "data"]
        problem = response_problem(events, tokens, last.get(record.get("payload", {}).get("PROMPT", "")))
        if problem:
            problems.append(problem)
            continue
        ttft.append(times[0] - record["start_perf_ns"])
        latency.append(times[-1] - record["start_perf_ns"])
        gaps += [b - a for a, b in zip(times[:-1], times[1:], strict=True)]
    if errors or problems or not ttft:
        raise RuntimeError(f"AIPerf: {errors} errors, {len(problems)} wrong answers {problems[:2]} of {len(ttft)} requests")
    mine = figures(ttft, latency, gaps, float(summary["request_throughput"]["avg"]))
    # AIPerf's own TTFT, with ours from its records beside it (they must agree: the same stamps)
    return mine | {"ttft50_own": float(summary["time_to_first_token"]["p50"]), "requests": len(ttft)}


def cpu_list(text: str) -> list[int]:
    """"0,2" or "0-7,9": the CPUs named."""
    cpus: list[int] = []
    for part in (x.strip() for x in text.split(",") if x.strip()):
        low, _, high = part.partition("-")
        cpus += range(int(low), int(high or low) + 1)
    return cpus


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     epilog="Fits: CPU here (toy_llm on the embedded server), about 1 minute per level "
                                            "and round per tool (AIPerf: about a minute more per run, its start-up); "
                                            "perf_analyzer from .wheels/ (set up on first use). On a GPU box, "
                                            "--variant 1x serves toy_llm's torch decoder on the GPU.")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval-ms", type=int, default=3000, help="measurement window, perf_analyzer and ours")
    parser.add_argument("--stability", type=float, default=25.0,
                        help="stability rule, both: the last 3 windows' throughput and latency within this percent")
    parser.add_argument("--max-windows", type=int, default=20, help="windows before a level gives up, both")
    parser.add_argument("--tokens", type=int, default=8, help="MAX_TOKENS of every prompt (responses per request)")
    parser.add_argument("--variant", default="cpu", help="toy_llm's variant: cpu (numpy), 1x (torch decoder on GPU 0)")
    parser.add_argument("--server-cpus", default="", metavar="0-7", help="host CPUs for the server and its Python stub (0,1 or 0-7)")
    parser.add_argument("--client-cpus", default="", metavar="8-15", help="host CPUs for every client (apart from the server's)")
    parser.add_argument("--aiperf", type=Path, default=None, metavar="PATH",
                        help="AIPerf's executable (in a venv of its own): adds AIPerf and ours over generate_stream")
    parser.add_argument("--our-workers", type=int, nargs="*", default=[], metavar="N",
                        help="also ours over grpc_stream with load.workers = N (a column ours_wN each, beside "
                             "ours with the workers rule)")
    parser.add_argument("--http", action="store_true",
                        help="also ours over generate_stream (HTTP/1.1 server-sent events) against perf_analyzer's gRPC "
                             "stream: another protocol to the same server, a cross-check of our HTTP stream's timing")
    parser.add_argument("--aiperf-seconds", type=float, default=10.0, help="AIPerf's --benchmark-duration per run")
    return parser


def group_wakeups(pgid: int) -> int:
    """Context switches so far of every thread of the live processes of group ``pgid``
    (/proc/PID/task/TID/status): how often the server's threads were woken or put off."""
    from engine.server.startup import group_members

    total = 0
    for pid, _ in group_members(pgid):
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                for line in (task / "status").read_text().splitlines():
                    if "ctxt_switches:" in line:
                        total += int(line.split()[-1])
        except (OSError, ValueError):
            continue
    return total


def server_work(server: Any) -> tuple[int, int, int]:
    """(CPU ticks of the server's process group, tritonserver and its Python stubs; its threads'
    context switches; requests it has served toy_llm), read before and after each tool's run: the server's
    work per request under each client's traffic."""
    from engine.net.http1 import request_blocking
    from engine.server.startup import group_cpu_ticks

    stats = request_blocking(server.http_url, "/v2/models/toy_llm/stats").json()
    served = int(stats["model_stats"][0]["inference_stats"]["success"]["count"])
    return group_cpu_ticks(server.pid), group_wakeups(server.pid), served


def check_args(args: argparse.Namespace) -> str | None:
    if args.rounds < 1 or not args.levels or min(args.levels) < 1 or args.tokens < 2 or min(args.our_workers, default=1) < 1:
        return "--rounds, --levels and --our-workers must be >= 1, --tokens >= 2"
    try:
        args.server_cpus, args.client_cpus = cpu_list(args.server_cpus), cpu_list(args.client_cpus)
    except ValueError as exc:
        return f"--server-cpus / --client-cpus: {exc}"
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    unknown = sorted(set(args.server_cpus + args.client_cpus) - usable)
    if unknown:
        return f"CPUs {unknown} are not among this process's CPUs {sorted(usable)}"
    if set(args.server_cpus) & set(args.client_cpus):
        return "--server-cpus and --client-cpus overlap: the point of pinning is to keep them apart"
    if args.aiperf is not None and not (args.aiperf.is_file() and os.access(args.aiperf, os.X_OK)):
        return f"--aiperf {args.aiperf}: not an executable file (pip install 'aiperf==0.13.*' in a venv of its own)"
    return None


# each comparison: (tool, its reference)
PAIRS = (("ours", "perf_analyzer"), ("aiperf", "ours_http"))


def summary(rows: list[dict[str, Any]], levels: list[int], tools: tuple[str, ...],
            with_workers: dict[str, int], http: bool = False) -> list[str]:
    lines = []
    extra = tuple((t, "perf_analyzer") for t in with_workers) + ((("ours_http", "perf_analyzer"),) if http else ())
    for tool, ref in PAIRS + extra:
        if tool not in tools:
            continue
        lines.append(f"\n{tool} / {ref}, median over rounds [min-max of the per-round ratios]:")
        for level in levels:
            mine = [r for r in rows if r["level"] == level]
            cells = []
            for k in FIGURES:
                ratios = [r[tool][k] / r[ref][k] for r in mine if tool in r and ref in r and r[ref][k]]
                if ratios:
                    cells.append(f"{k} {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")
            lines.append(f"  c={level}: " + ", ".join(cells))
    lines.append("\nthe server's CPU (ms) and its threads' context switches per request it served (its process "
                 "group over each run), median over rounds:")
    for level in levels:
        mine = [r for r in rows if r["level"] == level]
        lines.append(f"  c={level}: " + ", ".join(
            f"{tool} {statistics.median(r[tool]['server_cpu_ms'] for r in mine if tool in r):.3f} ms "
            f"{statistics.median(r[tool]['server_switches'] for r in mine if tool in r):.1f} switches" for tool in tools))
    lines.append("\neach tool's spread between rounds ((max - min) / median, %):")
    for level in levels:
        mine = [r for r in rows if r["level"] == level]
        cells = []
        for tool in tools:
            parts = []
            for k in FIGURES:
                xs = [r[tool][k] for r in mine if tool in r]
                if len(xs) > 1 and statistics.median(xs) > 0:
                    parts.append(f"{k} {100 * (max(xs) - min(xs)) / statistics.median(xs):.0f}")
            cells.append(f"{tool} " + " ".join(parts))
        lines.append(f"  c={level}: " + "; ".join(cells))
    return lines


def run(args: argparse.Namespace) -> int:
    from bench.common import out_dir, stamp
    from bench.tools import SetupError, ensure_perf_analyzer
    from engine.errors import UserError
    from engine.server.embedded import EmbeddedServer
    from engine.triton.target import Target, describe_target

    problem = check_args(args)
    if problem:
        print(f"stream_fidelity: {problem}")
        return 2
    try:
        pa, env = ensure_perf_analyzer()
    except SetupError as exc:
        print(f"stream_fidelity: {exc}")
        return 2
    work = Path(tempfile.mkdtemp(prefix="stream_fidelity_"))
    with_workers = {f"ours_w{n}": n for n in args.our_workers}  # ours at load.workers = n, by column
    tools: tuple[str, ...] = ("perf_analyzer", "ours", *with_workers)
    inputs: dict[str, Path] = {}
    if args.aiperf is not None:
        tools += ("aiperf", "ours_http")
        try:
            inputs = aiperf_setup(work, args.aiperf.resolve(), args.tokens)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"stream_fidelity: {exc}")
            return 2
    if args.http and "ours_http" not in tools:
        tools += ("ours_http",)
    rows: list[dict[str, Any]] = []
    path = out_dir() / f"stream_fidelity-{stamp()}.json"
    server = EmbeddedServer(model="toy_llm", variant=args.variant, log_dir=work, cpus=tuple(args.server_cpus))
    try:
        server.start()
    except UserError as exc:  # a variant this box cannot serve
        print(f"stream_fidelity: {exc}")
        return 2
    try:
        if args.client_cpus:  # every client is this process or its child, and inherits its CPUs
            os.sched_setaffinity(0, set(args.client_cpus))
        host, port = server.http_url.split("://", 1)[1].rsplit(":", 1)
        grpc_url = f"{host}:{int(port) + 1}"
        target = Target(server.http_url, "toy_llm")
        info = asyncio.run(describe_target(target))
        try:
            words = last_words(grpc_url, args.tokens)
        except RuntimeError as exc:
            print(f"stream_fidelity: {exc}")
            return 1
        data = prompts_file(work, args.tokens, words)
        last = dict(zip(PROMPTS, words, strict=True))
        print(f"toy_llm ({server.variant}) at {server.http_url}; CPUs: server {args.server_cpus or 'all'}, clients "
              f"{args.client_cpus or 'all'}; {args.tokens} tokens a request; tools {', '.join(tools)}", flush=True)
        for r in range(args.rounds):
            for level in args.levels:
                row: dict[str, Any] = {"round": r + 1, "level": level}
                order = tools[r % len(tools):] + tools[:r % len(tools)]  # a different tool first each round
                for tool in order:
                    started = time.monotonic()
                    work_before = server_work(server)
                    try:
                        if tool == "perf_analyzer":
                            row[tool] = theirs(pa, env, grpc_url, level, data, work / f"pa_r{r}_c{level}.json", args)
                        elif tool == "aiperf":
                            row[tool] = aiperf_run(args.aiperf, inputs, server.http_url, level, args.aiperf_seconds,
                                                   work / f"aiperf_r{r}_c{level}", args.tokens, last)
                        elif tool in with_workers:
                            row[tool] = ours(target, info, level, data, args, "grpc_stream", with_workers[tool])
                        else:
                            row[tool] = ours(target, info, level, data, args,
                                             "grpc_stream" if tool == "ours" else "generate_stream")
                    except (RuntimeError, subprocess.TimeoutExpired) as exc:
                        print(f"stream_fidelity: round {r + 1} c={level} {tool}: {exc}")
                        return 1
                    ticks, switches, served = (b - a for a, b in zip(work_before, server_work(server), strict=True))
                    row[tool]["server_cpu_ms"] = 1000 * ticks / os.sysconf("SC_CLK_TCK") / max(served, 1)
                    row[tool]["server_switches"] = switches / max(served, 1)
                    cells = ", ".join(f"{k} {row[tool][k]:.2f}" for k in FIGURES)
                    loop = row[tool].get("client_cpu_percent")
                    if loop is not None:  # ours: its load workers' CPU and their loops' lag
                        lag = row[tool]["loop_lag_p99_ms"]
                        cells += f", load workers' CPU {loop:.0f} %, loop lag p99 {lag if lag is not None else float('nan'):.2f} ms"
                    print(f"round {r + 1} c={level} {tool:<13} {cells} ({row[tool]['requests']} requests, "
                          f"{time.monotonic() - started:.0f} s; server CPU {row[tool]['server_cpu_ms']:.3f} ms and "
                          f"{row[tool]['server_switches']:.1f} context switches a request served)", flush=True)
                rows.append(row)
                path.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=1))
    finally:
        server.stop()
    for line in summary(rows, args.levels, tools, with_workers, args.http):
        print(line)
    print(f"\nrows: {path}")
    return 0
