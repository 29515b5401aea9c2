"""Near-zero-compute model: returns its input. Measures the serving path and the client, not a GPU.

GPUSCALE_MODEL_PACE_MS (in the server's environment): each execute first sleeps that long, a
model with a fixed service time. The test suite sets it: a sweep's flow is checked at a fraction
of the CPU that an unpaced identity server burns answering as fast as two cores allow. The
suite's other small models (accumulator, datacheck, mixed) read it too."""

import os
import time

import triton_python_backend_utils as pb_utils

PACE_S = float(os.environ.get("GPUSCALE_MODEL_PACE_MS") or 0) / 1000


class TritonPythonModel:
    def execute(self, requests):
        if PACE_S:
            time.sleep(PACE_S)
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", data)]))
        return responses
