"""Checks its inputs' content and refuses random data: token ids of a BERT vocabulary, JPEG bytes.

Per row: TOKENS must start with 101 ([CLS]) and hold ids in [0, 30522); IMAGE must start with the
JPEG magic bytes FF D8 FF; SCALE (FP16, optional) defaults to 1. Answers TOKEN_COUNT (ids in the
row), IMAGE_BYTES (the JPEG's length) and SCORE = SCALE * (sum of ids mod 1000) / 1000 in FP32.
A request that fails a check gets an error naming the input, the row and what is wrong. The same
code serves ``datacheck_nobatch`` (max_batch_size 0: one row, no batch dimension).
"""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils

# GPUSCALE_MODEL_PACE_MS (in the server's environment): each execute first sleeps that long, a fixed
# service time. The test suite sets it, so that its sweeps check the flow at a fraction of the CPU
PACE_S = float(os.environ.get("GPUSCALE_MODEL_PACE_MS") or 0) / 1000


CLS = 101
VOCABULARY = 30522
JPEG_MAGIC = b"\xff\xd8\xff"


def _invalid(message):
    code = getattr(pb_utils.TritonError, "INVALID_ARG", None)
    return pb_utils.TritonError(message) if code is None else pb_utils.TritonError(message, code)


def _element(value):
    return value if isinstance(value, bytes) else str(value).encode()


def check_rows(tokens, images):
    """One line on what is wrong with these rows, or None."""
    for row, ids in enumerate(tokens):
        if ids.size == 0 or ids[0] != CLS:
            first = "nothing" if ids.size == 0 else int(ids[0])
            return f"TOKENS row {row} starts with {first}, not {CLS} ([CLS]): not token ids"
        bad = ids[(ids < 0) | (ids >= VOCABULARY)]
        if bad.size:
            return f"TOKENS row {row} holds id {int(bad[0])}, outside the vocabulary [0, {VOCABULARY})"
    for row, image in enumerate(images):
        data = _element(image)
        if not data.startswith(JPEG_MAGIC):
            return f"IMAGE row {row} starts with {data[:3].hex(' ') or 'nothing'}, not ff d8 ff: not a JPEG"
    return None


def answer(tokens, images, scale):
    """The outputs for rows that passed the check, each of shape [rows, 1]."""
    rows = tokens.shape[0]
    counts = np.full((rows, 1), tokens.shape[1], np.int64)
    sizes = np.array([[len(_element(image))] for image in images], np.int64)
    sums = (tokens.sum(axis=1) % 1000).astype(np.float32).reshape(rows, 1)
    score = scale.astype(np.float32).reshape(rows, 1) * sums / np.float32(1000)
    return counts, sizes, score.astype(np.float32)


class TritonPythonModel:
    def initialize(self, args):
        self.batched = json.loads(args["model_config"]).get("max_batch_size", 0) > 0

    def execute(self, requests):
        if PACE_S:
            time.sleep(PACE_S)
        return [self._one(request) for request in requests]

    def _one(self, request):
        tokens = pb_utils.get_input_tensor_by_name(request, "TOKENS").as_numpy()
        images = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
        given = pb_utils.get_input_tensor_by_name(request, "SCALE")
        if not self.batched:  # one row, without the batch dimension
            tokens, images = tokens.reshape(1, -1), images.reshape(1, -1)
        rows = tokens.shape[0]
        scale = np.ones((rows, 1), np.float16) if given is None else given.as_numpy().reshape(rows, -1)[:, :1]
        problem = check_rows(tokens.reshape(rows, -1), images.reshape(rows, -1)[:, 0])
        if problem is not None:
            return pb_utils.InferenceResponse(output_tensors=[], error=_invalid(problem))
        outputs = answer(tokens.reshape(rows, -1), images.reshape(rows, -1)[:, 0], scale)
        if not self.batched:
            outputs = tuple(o.reshape(1) for o in outputs)
        names = ("TOKEN_COUNT", "IMAGE_BYTES", "SCORE")
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(n, o) for n, o in zip(names, outputs, strict=True)])
