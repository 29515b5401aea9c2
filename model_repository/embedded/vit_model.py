"""Triton Python-backend model serving a ViT image encoder (see vit.py beside it).

The instance runs on the GPU Triton assigns it (KIND_GPU) or on the CPU (KIND_CPU). Requests
that the dynamic batcher hands over together are run as one batch, the way vit_batching.py
describes: inputs taken through DLPack without a copy (on the host, or on a GPU when the client
uses CUDA shared memory and the config sets FORCE_CPU_ONLY_INPUT_TENSORS "no"), copied once
into a staging buffer, one host-to-device copy, a CUDA graph per batch-size bucket, one
device-to-host copy into a pinned buffer that the responses are sliced from.

Config parameters (all optional): arch, precision (fp16|fp32), weights, cpu_threads,
runner (graph|compile|eager; GPU only, default graph), batch_buckets ("1,2,4,...").
"compile" compiles once per bucket at start-up (tens of seconds each); with it, keep
batch_buckets short so the server starts within a minute.
"""

import json
import os
import sys

import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _log(message: str) -> None:
    logger = getattr(pb_utils, "Logger", None)
    if logger is not None:
        logger.log_warn(message)
    else:
        print(message, file=sys.stderr, flush=True)


class TritonPythonModel:
    def initialize(self, args):
        import torch
        from execute_clock import ExecuteClock
        from vit import build_vit
        from vit_batching import Runner, Stager, parse_buckets

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        on_gpu = args["model_instance_kind"] == "GPU" and torch.cuda.is_available()
        self.device = torch.device(f"cuda:{args['model_instance_device_id']}" if on_gpu else "cpu")
        # on a GPU the host threads only copy inputs into the staging buffer; on the CPU they compute
        # never more compute threads than the CPUs this stub may run on, nor than its server's share
        # of the cores (GPUSCALE_COMPUTE_THREADS: one of several servers on this box): more would
        # spin on each other's cores
        share = int(os.environ.get("GPUSCALE_COMPUTE_THREADS") or 0) or len(os.sched_getaffinity(0))
        torch.set_num_threads(max(1, min(int(params.get("cpu_threads", "1")), len(os.sched_getaffinity(0)), share)))
        if on_gpu:
            torch.cuda.set_device(self.device)
        # fp16 on GPUs is how the ONNX/TensorRT deployments of this model are served
        dtype = torch.float16 if on_gpu and params.get("precision", "fp16") == "fp16" else torch.float32
        weights = params.get("weights") or None
        model = build_vit(params.get("arch", "vit_tiny"), weights=weights).to(self.device, dtype)

        self.input_name = config["input"][0]["name"]
        self.output_name = config["output"][0]["name"]
        item_shape = [int(d) for d in config["input"][0]["dims"]]
        out_dim = int(config["output"][0]["dims"][0])
        capacity = max(1, int(config.get("max_batch_size", 0)))
        buckets = parse_buckets(params.get("batch_buckets", ""), capacity)
        mode = params.get("runner", "graph") if on_gpu else "eager"

        self.torch = torch
        self.stager = Stager(capacity, item_shape, self.device)
        self.stream = torch.cuda.Stream(self.device) if on_gpu else None
        self.out_host = torch.zeros((capacity, out_dim), dtype=torch.float32, pin_memory=on_gpu)
        self.out_numpy = self.out_host.numpy()
        self.runner = Runner(model, self.stager, buckets, dtype, mode, log=_log)
        if self.stream is not None:
            with torch.cuda.stream(self.stream):
                seconds = self.runner.prepare()
        else:
            seconds = self.runner.prepare()
        # per-instance section timings, only when GPUSCALE_VIT_TIMING names a directory (diagnosis)
        self.clock = ExecuteClock.from_env(config["name"], str(self.device))
        state = f"eager fallback ({self.runner.fallback})" if self.runner.fallback else self.runner.mode
        _log(f"{config['name']} on {self.device}: runner {state}, buckets {buckets}, ready in {seconds:.1f} s")

    def _inputs(self, requests):
        torch = self.torch
        # DLPack: a view of Triton's buffer (host shared memory or GPU memory), never a copy here
        return [
            torch.from_dlpack(pb_utils.get_input_tensor_by_name(r, self.input_name).to_dlpack()) for r in requests
        ]

    def _run(self, inputs) -> int:
        clock = self.clock
        n = self.stager.stage(inputs)
        if clock:
            clock.section("stage")
        out = self.runner.run(n)
        if clock:
            clock.section("run")
        if out.device.type == "cpu":
            self.out_host[:n].copy_(out)
        else:
            self.out_host[:n].copy_(out, non_blocking=True)  # one device-to-host copy per batch
            self.stream.synchronize()  # also keeps the inputs' buffers alive until the GPU is done
        if clock:
            clock.section("sync")
        return n

    def execute(self, requests):
        clock = self.clock
        if clock:
            clock.begin()
        try:
            inputs = self._inputs(requests)
            if clock:
                clock.section("inputs")
            if self.stream is not None:
                with self.torch.cuda.stream(self.stream):
                    self._run(inputs)
            else:
                self._run(inputs)
        except Exception as exc:  # noqa: BLE001 - answer every request with the reason
            error = pb_utils.TritonError(f"{type(exc).__name__}: {exc}")
            return [pb_utils.InferenceResponse(error=error) for _ in requests]
        responses, start = [], 0
        for tensor in inputs:
            size = int(tensor.shape[0])
            # a copy of 2 KB per image: the pinned buffer is overwritten by the next batch
            rows = self.out_numpy[start : start + size].copy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(self.output_name, rows)]))
            start += size
        if clock:
            elsewhere = sum(1 for t in inputs if t.device != self.device)
            clock.end(len(requests), start, elsewhere)
        return responses

    def finalize(self):
        if self.clock:
            self.clock.write()
