"""A decoupled (streaming) model's server time is not split into queue, compute and "outside the
server".

Triton's queue and compute statistics time the model's execute calls, not a decoupled request's
life: the model answers from that call (or after it) with a stream of responses, so
client latency - server time put 99 % of a stream "outside the server". Triton's per-response
statistics (``response_stats``) would cover them, but the embedded Triton 2.51's Python backend
leaves them empty (GET /v2/models/toy_llm/stats after a grpc_stream sweep: "response_stats": {}).
So the times are left out and the breakdown says why; its counts and batch size stay (they count
requests all the same). Pure.
"""

from __future__ import annotations

import msgspec

from engine.events import LevelResult, ServerBreakdown, WindowResult
from engine.transport_table import is_decoupled

DECOUPLED_SPLIT = "server split not measured for a decoupled model"


def unsplit(server: ServerBreakdown | None) -> ServerBreakdown | None:
    """``server`` without its times, saying why (DECOUPLED_SPLIT); None stays None."""
    if server is None:
        return None
    return msgspec.structs.replace(server, queue=None, compute_input=None, compute_infer=None, compute_output=None,
                   server_total=None, client_minus_server=None, no_split=DECOUPLED_SPLIT)


def unsplit_level(result: LevelResult) -> LevelResult:
    """A level of a decoupled model: its server breakdown and each endpoint's, unsplit."""
    endpoints = [msgspec.structs.replace(ep, server=unsplit(ep.server)) for ep in result.endpoints]
    return msgspec.structs.replace(result, server=unsplit(result.server), endpoints=endpoints)


def unsplit_window(window: WindowResult) -> WindowResult:
    return msgspec.structs.replace(window, server=unsplit(window.server))


def split_applies(model_config: dict) -> bool:
    """Whether Triton's statistics give a request's queue/compute split for this model."""
    return not is_decoupled(model_config)
