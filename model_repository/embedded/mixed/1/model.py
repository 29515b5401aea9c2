"""Echoes inputs of every kind back (IDS, TEXT, HALF, BRAIN) and says whether the optional EXTRA
was sent. BF16 has no numpy type: BRAIN goes back through DLPack, never through numpy. The same
code serves ``mixed_nobatch`` (max_batch_size 0)."""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils

# GPUSCALE_MODEL_PACE_MS (in the server's environment): each execute first sleeps that long, a fixed
# service time. The test suite sets it, so that its sweeps check the flow at a fraction of the CPU
PACE_S = float(os.environ.get("GPUSCALE_MODEL_PACE_MS") or 0) / 1000


ECHOED = ("IDS", "TEXT", "HALF")


class TritonPythonModel:
    def initialize(self, args):
        self.batched = json.loads(args["model_config"]).get("max_batch_size", 0) > 0

    def execute(self, requests):
        if PACE_S:
            time.sleep(PACE_S)
        responses = []
        for request in requests:
            outputs = [pb_utils.Tensor(f"{n}_OUT", pb_utils.get_input_tensor_by_name(request, n).as_numpy())
                       for n in ECHOED]
            brain = pb_utils.get_input_tensor_by_name(request, "BRAIN")
            outputs.append(pb_utils.Tensor.from_dlpack("BRAIN_OUT", brain.to_dlpack()))
            sent = pb_utils.get_input_tensor_by_name(request, "EXTRA") is not None
            rows = pb_utils.get_input_tensor_by_name(request, "PIXELS").as_numpy().shape[0] if self.batched else 0
            flag = np.full((rows, 1) if self.batched else (1,), sent, np.bool_)
            outputs.append(pb_utils.Tensor("EXTRA_SENT", flag))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
