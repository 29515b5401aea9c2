"""A running sum per sequence (Triton's sequence batcher, direct strategy): OUTPUT = the sum of
INPUT over the sequence's steps so far. State is kept per correlation id and checked on every
step, so a tool that drops START, reuses a live sequence id or sends a step after END is refused
with the reason (the error reaches the client as the request's error). The same code serves
``accumulator_idle`` and ``accumulator_oldest``."""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils

# GPUSCALE_MODEL_PACE_MS (in the server's environment): each execute first sleeps that long, a fixed
# service time. The test suite sets it, so that its sweeps check the flow at a fraction of the CPU
PACE_S = float(os.environ.get("GPUSCALE_MODEL_PACE_MS") or 0) / 1000


def _scalar(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy().reshape(-1)


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}  # correlation id -> running sum (int64: checked against INT32 on output)

    def execute(self, requests):
        if PACE_S:
            time.sleep(PACE_S)
        return [self._step(request) for request in requests]

    def _step(self, request):
        start, end, ready, corrid = (_scalar(request, n) for n in ("START", "END", "READY", "CORRID"))
        values = _scalar(request, "INPUT")
        if start is None or end is None or ready is None or corrid is None or values is None:
            return _error("a control input is missing: is the sequence batcher configured?")
        sums = []
        for row in range(values.shape[0]):  # one row per batched sequence slot
            if not ready[row]:
                sums.append(0)
                continue
            seq = int(corrid[row])
            if start[row]:
                total = 0
            elif seq in self.sums:
                total = self.sums[seq]
            else:
                return _error(f"sequence {seq}: a step without START, or after its END (state lost)")
            total += int(values[row])
            if end[row]:
                self.sums.pop(seq, None)
            else:
                self.sums[seq] = total
            sums.append(total)
        out = np.array(sums, np.int32).reshape(values.shape[0], 1)
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", out)])


def _error(text):
    return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(text))
