"""datacheck_ensemble's second step: each row's counts as text, b"<tokens> tokens, <bytes> bytes"."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tokens = pb_utils.get_input_tensor_by_name(request, "TOKEN_COUNT").as_numpy().reshape(-1)
            sizes = pb_utils.get_input_tensor_by_name(request, "IMAGE_BYTES").as_numpy().reshape(-1)
            labels = np.array([[f"{t} tokens, {s} bytes".encode()] for t, s in zip(tokens, sizes, strict=True)], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("LABEL", labels)]))
        return responses
