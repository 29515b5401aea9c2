"""The wire's ceiling: takes any FP32 payload, answers each item's element count (INT32).

No compute and no copy of the input: the answer comes from the tensor's shape, read through
DLPack, so it works the same for inputs on the host and on a GPU (CUDA shared memory). The
count lets a test check that the whole payload arrived.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


def _shape(tensor) -> tuple:
    if tensor.is_cpu():
        return tensor.as_numpy().shape  # a view of the shared memory, no copy
    # a GPU tensor (CUDA shared memory): its shape through torch, the data stays where it is
    from torch.utils.dlpack import from_dlpack

    return tuple(from_dlpack(tensor.to_dlpack()).shape)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            shape = _shape(pb_utils.get_input_tensor_by_name(request, "INPUT0"))
            counts = np.full((shape[0], 1), int(np.prod(shape[1:])), dtype=np.int32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", counts)]))
        return responses
