"""Triton Python-backend model serving a ViT image encoder (see vit.py beside it).

The instance runs on the GPU Triton assigns it (KIND_GPU) or on the CPU (KIND_CPU). Requests
that the dynamic batcher hands over together are run as one batch.
"""

import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class TritonPythonModel:
    def initialize(self, args):
        import torch

        from vit import build_vit

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        on_gpu = args["model_instance_kind"] == "GPU" and torch.cuda.is_available()
        self.device = torch.device(f"cuda:{args['model_instance_device_id']}" if on_gpu else "cpu")
        if not on_gpu:
            torch.set_num_threads(int(params.get("cpu_threads", "1")))
        # fp16 on GPUs is how the ONNX/TensorRT deployments of this model are served
        self.dtype = torch.float16 if on_gpu and params.get("precision", "fp16") == "fp16" else torch.float32
        weights = params.get("weights") or None
        self.model = build_vit(params.get("arch", "vit_tiny"), weights=weights).to(self.device, self.dtype)
        self.input_name = config["input"][0]["name"]
        self.output_name = config["output"][0]["name"]
        self.torch = torch
        with torch.inference_mode():  # first call allocates; keep it out of measurements
            self.model(torch.zeros(1, 3, 224, 224, device=self.device, dtype=self.dtype))

    def execute(self, requests):
        torch = self.torch
        arrays = [pb_utils.get_input_tensor_by_name(r, self.input_name).as_numpy() for r in requests]
        sizes = [a.shape[0] for a in arrays]
        batch = torch.from_numpy(np.concatenate(arrays) if len(arrays) > 1 else arrays[0])
        with torch.inference_mode():
            out = self.model(batch.to(self.device, self.dtype, non_blocking=True)).float().cpu().numpy()
        responses, start = [], 0
        for size in sizes:
            tensor = pb_utils.Tensor(self.output_name, out[start : start + size])
            responses.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
            start += size
        return responses
