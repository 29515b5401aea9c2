"""The transports a sweep sends its requests over, in one table (load.transport).

Each entry names the module that implements it (under engine/load/transports/: what the session
prepares once per sweep, and how a load worker connects and sends one request) and the words
reports and checks use for it. Profiles, reports and the wire check read this table; nothing else
compares transport names. Adding one: docs/architecture.md, Recipes, "A transport". Standard
library only: every layer of the engine reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TRANSPORT = "http"


@dataclass(frozen=True)
class TransportSpec:
    name: str  # the profile's load.transport
    module: str  # dotted path of a module with TRANSPORT (engine.load.transport.Transport)
    inputs_by: str  # how a report says the inputs travelled: "inputs by <inputs_by>"
    path: str  # the request path, in the wire check's words
    request_noun: str  # what the wire check's request sizes are sizes of ("bodies", "requests")
    local_only: bool = False  # needs the server on this machine (shared memory): refused with a remote server
    streams: bool = False  # carries a decoupled model's stream of responses per request


TRANSPORTS: dict[str, TransportSpec] = {
    spec.name: spec
    for spec in (
        TransportSpec("http", "engine.load.transports.http", "HTTP body", "the HTTP path", "bodies"),
        TransportSpec("system_shm", "engine.load.transports.system_shm", "system shared memory",
                      "the system shared-memory path", "requests", local_only=True),
        TransportSpec("cuda_shm", "engine.load.transports.cuda_shm", "CUDA shared memory",
                      "the CUDA shared-memory path", "requests", local_only=True),
        TransportSpec("grpc", "engine.load.transports.grpc", "gRPC message", "the gRPC path", "requests"),
        TransportSpec("grpc_stream", "engine.load.transports.grpc_stream", "gRPC stream message",
                      "the gRPC streaming path", "requests", streams=True),
        TransportSpec("generate_stream", "engine.load.transports.generate_stream", "generate-extension JSON",
                      "the HTTP event-stream path", "bodies", streams=True),
    )
}


def transport_spec(name: str) -> TransportSpec:
    """The entry for ``name``; a name this version does not know (a recording made by another)
    gets plain words made of the name itself."""
    known = TRANSPORTS.get(name)
    if known is not None:
        return known
    return TransportSpec(name, "", name, f"the {name} path", "requests")


def is_decoupled(model_config: dict) -> bool:
    """Whether Triton's model configuration says the model answers a request with a stream of
    responses (``model_transaction_policy { decoupled: true }``)."""
    policy = model_config.get("model_transaction_policy")
    return isinstance(policy, dict) and policy.get("decoupled") is True

