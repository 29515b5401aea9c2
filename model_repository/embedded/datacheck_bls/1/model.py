"""A BLS model: each request's inputs passed to datacheck through the server (pb_utils'
InferenceRequest), two of its outputs answered; datacheck's refusal, if any, is this model's."""

import triton_python_backend_utils as pb_utils

CALLED = "datacheck"
OUTPUTS = ("TOKEN_COUNT", "SCORE")


def _invalid(message):
    code = getattr(pb_utils.TritonError, "INVALID_ARG", None)
    return pb_utils.TritonError(message) if code is None else pb_utils.TritonError(message, code)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            inputs = [t for t in (pb_utils.get_input_tensor_by_name(request, n) for n in ("TOKENS", "IMAGE", "SCALE"))
                      if t is not None]  # SCALE is optional
            called = pb_utils.InferenceRequest(model_name=CALLED, requested_output_names=list(OUTPUTS),
                                               inputs=inputs).exec()
            if called.has_error():  # refused as datacheck refused it (a bad input, not a failure)
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=_invalid(called.error().message())))
                continue
            outputs = [pb_utils.get_output_tensor_by_name(called, n) for n in OUTPUTS]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
