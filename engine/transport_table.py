"""The transports a sweep sends its requests over, in one table (load.transport).

Each entry names the module that implements it (under engine/triton/transports/ or engine/openai/:
how a load worker connects and sends one request), the server API that offers it (load.api) and the words
reports and checks use for it. Profiles, reports and the wire check read this table; nothing else
compares transport names. Adding one: docs/architecture.md, Recipes, "A transport". Standard
library only: every layer of the engine reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TRANSPORT = "http"
TRITON, OPENAI = "triton", "openai"  # the server APIs (load.api) whose transports these are
OPENAI_DEFAULT = "chat_stream"  # load.api = openai with load.transport left at http or auto
AUTO = "auto"  # load.transport = auto: the session picks one of the table (auto_transport)
EMBEDDED, LOCAL, REMOTE = "embedded", "local", "remote"  # where the server runs, for auto_transport


@dataclass(frozen=True)
class TransportSpec:
    name: str  # the profile's load.transport
    module: str  # dotted path of a module with TRANSPORT (engine.triton.transports.Transport)
    inputs_by: str  # how a report says the inputs travelled: "inputs by <inputs_by>"
    path: str  # the request path, in the wire check's words
    request_noun: str  # what the wire check's request sizes are sizes of ("bodies", "requests")
    local_only: bool = False  # needs the server on this machine (shared memory): refused with a remote server
    streams: bool = False  # carries a decoupled model's stream of responses per request
    # the share of the mean latency our side may add before a level is client-bound
    # (engine/load/audit.py); 5 % where it is only a lower bound of what a library adds
    delay_limit: float = 0.10
    api: str = TRITON  # the server API that offers it (load.api)


TRANSPORTS: dict[str, TransportSpec] = {
    spec.name: spec
    for spec in (
        TransportSpec("http", "engine.triton.transports.http", "HTTP body", "the HTTP path", "bodies"),
        TransportSpec("system_shm", "engine.triton.transports.system_shm", "system shared memory",
                      "the system shared-memory path", "requests", local_only=True),
        TransportSpec("cuda_shm", "engine.triton.transports.cuda_shm", "CUDA shared memory",
                      "the CUDA shared-memory path", "requests", local_only=True),
        TransportSpec("grpc", "engine.triton.transports.grpc", "gRPC message", "the gRPC path", "requests"),
        TransportSpec("grpc_stream", "engine.triton.transports.grpc_stream", "gRPC stream message",
                      "the gRPC streaming path", "requests", streams=True),
        TransportSpec("generate_stream", "engine.triton.transports.generate_stream", "generate-extension JSON",
                      "the HTTP event-stream path", "bodies", streams=True),
        # OpenAI's API (load.api = openai): one module, the payload says which endpoint and whether it streams
        TransportSpec("chat_stream", "engine.openai.transport", "chat-completions JSON, streamed",
                      "the OpenAI event-stream path", "bodies", streams=True, api=OPENAI),
        TransportSpec("chat", "engine.openai.transport", "chat-completions JSON", "the OpenAI HTTP path",
                      "bodies", api=OPENAI),
        TransportSpec("completions_stream", "engine.openai.transport", "completions JSON, streamed",
                      "the OpenAI event-stream path", "bodies", streams=True, api=OPENAI),
        TransportSpec("completions", "engine.openai.transport", "completions JSON", "the OpenAI HTTP path",
                      "bodies", api=OPENAI),
    )
}


def api_of_url(url: str) -> str:
    """The server API a URL names: OPENAI where its path ends in /v1 (OpenAI's base URL,
    http://host:8000/v1), else TRITON (KServe v2 lives at the root: /v2/...)."""
    from urllib.parse import urlsplit

    try:
        path = urlsplit(url).path
    except ValueError:
        return TRITON
    return OPENAI if path.rstrip("/").endswith("/v1") else TRITON


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


@dataclass(frozen=True)
class TransportPick:
    """What load.transport = auto became, and why, in words for the run's notice."""

    name: str  # a name of TRANSPORTS
    why: str
    asked: str = AUTO  # what load.transport said: auto, or (load.api = openai) the default http

    @property
    def line(self) -> str:
        return f"load.transport = {self.asked}: {self.name}, {self.why}"


def auto_transport(where: str, model_on_gpus: bool = False, cuda_here: bool = False, hosts: int = 1,
                   streams: bool = False, linux: bool = True) -> TransportPick:
    """The transport that lets the GPUs, not the request path, be the limit. ``where``: EMBEDDED
    (the tool's own server), LOCAL (a server URL on this machine) or REMOTE; ``model_on_gpus``:
    the tool's own server runs the model on GPUs (their indices are known, as cuda_shm needs);
    ``cuda_here``: torch with CUDA imports here; ``hosts``: client hosts sending the load;
    ``streams``: the model answers with a stream of responses (decoupled); ``linux``: system
    shared memory (/dev/shm) exists here."""
    if streams:
        return TransportPick("grpc_stream", "the model streams its responses and shared memory carries no stream")
    if hosts > 1:
        return TransportPick("http", f"the load comes from {hosts} hosts and shared memory reaches only this one")
    if where == REMOTE:
        return TransportPick("http", "the server is on another machine, which shared memory cannot reach; "
                             "for more load than one client sends, load from more hosts (--hosts N)")
    if not linux:
        return TransportPick("http", "this system has no /dev/shm for system shared memory")
    if where == EMBEDDED and model_on_gpus and cuda_here:
        return TransportPick("cuda_shm", "the server is on this machine with the model on its GPUs and torch with "
                             "CUDA is here: the inputs wait in GPU memory, off the HTTP body")
    if where == EMBEDDED and model_on_gpus:
        why = ("with the model on its GPUs, but torch with CUDA is not importable here (cuda_shm needs it: "
               "pip install 'gpuscale-tui[probe]')")
    elif where == EMBEDDED:
        why = "with the model on its CPU"
    else:
        why = "(a server this tool did not start: cuda_shm needs the GPUs of the tool's own server)"
    return TransportPick("system_shm", f"the server is on this machine {why}: the inputs wait in system shared "
                         "memory, off the HTTP body")
