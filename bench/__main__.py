"""``python -m bench STAGE [flags]``: the one entry point of the benchmarks.

Each stage lives in a module of this package with ``build_parser(prog)`` and ``run(args)``;
the module is imported only when its stage runs, so listing the stages costs nothing.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    name: str
    module: str  # bench.<module> holds build_parser() and run()
    compares: str  # what it measures against which anchor, one line
    gpu_run: str  # the device run it fits in with the flags its --help shows
    # starts no embedded Triton: no numpy<2 re-exec on a numpy-2 box (the box's scipy needs numpy 2)
    serverless: bool = False


STAGES = (
    Stage("fidelity", "fidelity", "our load engine against perf_analyzer 2.41: throughput, p50, p99 per level and in rate mode",
          "2x H200, one 10-minute call (the --help's GPU example)"),
    Stage("client_cpu", "fidelity", "client CPU per request on the identity model: our engine against perf_analyzer",
          "any box, CPU variant; about 1 minute"),
    Stage("stream_fidelity", "stream_fidelity", "our grpc_stream against perf_analyzer 2.41 --streaming on toy_llm: req/s, p50, TTFT, ITL"
          " (--aiperf: AIPerf 0.13 and our generate_stream beside them)",
          "CPU here, about 1 minute per level and round; 1x H200/H100 (--variant 1x, the torch decoder), one 10-minute call"),
    Stage("openai_fidelity", "openai_fidelity", "our chat_stream against AIPerf 0.13 (--vllm: and `vllm bench serve`) on a real llama-server: req/s, TTFT, ITL, output tok/s",
          "CPU here (the tests' tiny GGUF), about 1.5 minutes per level and round (about 2 with --vllm)"),
    Stage("input_rules", "input_rules", "input-data files we run and perf_analyzer 2.41 refuses, each against the file its rule says it stands for",
          "CPU here (the embedded mixed model), under a minute"),
    Stage("transports", "transports", "our http/system_shm/cuda_shm against perf_analyzer's --shared-memory modes, per variant",
          "2x or 4x H200, one 10-minute call"),
    Stage("model_speed", "model_speed", "the embedded ViT: in-process forward, then Triton under perf_analyzer, and the wire model",
          "1x or 2x H200, one 5-10 minute call (--budget-s)"),
    Stage("probe_overhead", "probe_overhead", "the training probe's samples/s against a bare DDP loop",
          "CPU here (2 gloo ranks) or 4 GPUs, about 2 minutes", serverless=True),
    Stage("tui_overhead", "tui_overhead", "the same sweep in the TUI against headless (8 synthetic GPUs at 5 Hz, charts view)",
          "CPU here, or a GPU box with textual carried (carry --textual), about 6 minutes"),
    Stage("chart_cost", "chart_cost", "one refresh of the charts view's charts: tui/plots.py against plotext",
          "any box, no server; seconds (needs plotext installed)"),
    Stage("replay_keys", "replay_keys", "view keys answered while a one-hour 8-GPU recording replays at max speed (charts view)",
          "any box (a GPU box: carry --textual), no server; about 3 minutes"),
    Stage("recording_scale", "recording_scale", "a one-hour 8-GPU recording: write, open, export, replay against bare SQLite",
          "CPU, no server; under a minute"),
    Stage("wire_libraries", "wire_libraries", "our HTTP/1.1, HTTP/2 frames and HPACK against h11, h2 and hpack: "
          "µs per message on Triton's captured bytes", "any box, no server; about a minute (needs h11/h2/hpack: --libs)"),
    Stage("merge_cost", "merge_cost", "kept latency histograms: per-window build, encode and bytes; merging N hosts' windows (N = 2..64)",
          "any box, no server; about a minute"),
    Stage("soak", "soak", "the app's memory, descriptors and recording over a long headless run", "CPU, 30 minutes by default"),
    Stage("grpc_styles", "grpc_styles", "gRPC client styles (grpc.aio, sync future(), threads) against perf_analyzer -i grpc",
          "any box, CPU variant; a few minutes"),
    Stage("grpc_h2", "grpc_h2", "unary gRPC on our own HTTP/2 (load.transport=grpc) against "
          "perf_analyzer -i grpc, alternating rounds", "any box, CPU variant; about 1.5 minutes at the defaults (12 runs of about 7 s)"),
    Stage("grpc_call_cpu", "grpc_call_cpu", "our unary gRPC client's CPU per call in parts: the worker over real sockets, "
          "the same with no socket (replayed answers), an asyncio floor; --base-root: another checkout's beside it",
          "any box, CPU variant; about a minute at the defaults"),
    Stage("noise", "noise", "the same run quiet and under CPU hogs: the answer lines agree or say not decided",
          "1x H200/H100, one 10-minute call with short windows; a CPU box, a few minutes"),
    Stage("multihost_engine", "multihost_engine", "the engine for several load hosts: the group's store against TCPStore (alternating rounds), Ray where asked; group forming, "
          "publishing a window, start-barrier skew", "CPU here (loopback processes); Ray needs --ray-python",
          serverless=True),
    Stage("multihost", "multihost", "1, 2 and 4 client processes through the multi-host engine against one server "
          "at c=256, perf_analyzer with one process per client beside them", "1x H200, one 10-minute call"),
    Stage("scale_study", "scale_study", "the study's scale-out-or-up answer and each config's peak (1x, Nx, 1x*N) against perf_analyzer"
          " alone on each config, N at once against N one-GPU servers; 3 alternating rounds",
          "2x or 4x H100/H200, one 10-minute call per box size; CPU here (--cpu), a few minutes"),
    Stage("sequences", "sequences", "a sequence model (accumulator, Triton's sequence batcher) against perf_analyzer "
          "--sequence-length over HTTP: infer/s, sequences/s, p50, p99, alternating rounds",
          "any box, CPU variant; about 2 minutes at the defaults"),
    Stage("step_costs", "step_costs", "what a sequence step costs by how it is sent (two writes, a thread hand-off, perf_analyzer's"
          " id, ids and inputs), each arm against our request form in alternating rounds",
          "any box, CPU; about 2 minutes at the defaults"),
    Stage("server_start", "server_start", "the embedded server's start with Triton's config auto-complete off (ours) against on:"
          " seconds to ready, server CPU, the config served", "any box; about 10 s per model and round"),
    Stage("carry", "carry", "pack what a GPU box without network needs (.carry/, .wheels/perf_analyzer)", "here, before a device run"),
)
BY_NAME = {s.name: s for s in STAGES}


def usage() -> str:
    lines = ["usage: python -m bench STAGE [flags]     (python -m bench STAGE --help: its flags)", "", "stages:"]
    width = max(len(s.name) for s in STAGES)
    for s in STAGES:
        lines.append(f"  {s.name:<{width}}  {s.compares}")
        lines.append(f"  {'':<{width}}  fits: {s.gpu_run}")
    lines += ["", "Output goes to $OUT if set, else .bench-out/. On a GPU box the carried tritonserver",
              "(.carry/triton.tar.xz, from `python -m bench carry`) is unpacked and used by every stage."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    stage = BY_NAME.get(argv[0])
    if stage is None:
        print(f"python -m bench: no stage {argv[0]!r}; stages: {', '.join(BY_NAME)}", file=sys.stderr)
        return 2
    if stage.name != "carry":  # first: the stage's imports may need what the carry brings (psutil)
        from bench.common import device_environment

        device_environment(numpy1=not stage.serverless)
    module = importlib.import_module(f"bench.{stage.module}")
    parser = module.build_parser(f"python -m bench {stage.name}", stage.name)
    args = parser.parse_args(argv[1:])
    from engine.errors import UserError

    try:
        return int(module.run(args) or 0)
    except UserError as exc:  # bad input found past the parser (a variant, a model): one line
        print(f"python -m bench {stage.name}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
