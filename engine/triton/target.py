"""What the load engine talks to: a Triton server URL (or several endpoints) and one of its models.

``describe_target`` asks the server what the model looks like (KServe v2 metadata plus Triton's
model configuration) so that requests can be built for any model, and turns every way this can
go wrong into one clear line (engine.errors.UserError).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from engine.errors import UserError
from engine.net import http1


@dataclass(frozen=True)
class Endpoint:
    """One server of a sweep spread over several (engine/triton/endpoints.py): its figures, errors
    and GPUs are labelled by ``name``."""

    name: str  # "ep1", "ep2", ...
    http_url: str
    metrics_url: str | None = None  # its /metrics (GPU telemetry); None: not read
    grpc_url: str = ""  # host:port; "": the HTTP port + 1
    # where this server's model has instances, as this process numbers the GPUs (a server pinned
    # to one GPU by CUDA_VISIBLE_DEVICES); (): the sweep's own (cuda_shm puts the inputs there)
    gpus: tuple[int, ...] = ()
    # the server's own number for gpus[0] where it differs from ours (pinned: its GPU 0); None: the same
    server_gpu: int | None = None


@dataclass
class Target:
    http_url: str
    model: str
    model_version: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # sent with every request (auth)
    timeout_s: float = 30.0  # control calls; the load's own timeout is load.request_timeout_s
    # shapes for inputs with variable dimensions (without the batch dimension)
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    grpc_url: str = ""  # host:port of its gRPC endpoint; "": the HTTP port + 1 (the grpc transport)
    # two or more: the load is spread over these servers, and http_url is the first's; empty: one server
    endpoints: list[Endpoint] = field(default_factory=list)
    # an ensemble's step models (engine/triton/server_stats.ensemble_steps): the server's queue and
    # compute times are theirs, as perf_analyzer reports them; (): the model's own statistics
    composing: tuple[str, ...] = ()
    # a decoupled model: Triton's statistics do not split its requests' time (analysis/stream_split.py)
    decoupled: bool = False

    def endpoint_list(self) -> list[Endpoint]:
        """The servers the load goes to: the endpoints, or this target's one URL."""
        return list(self.endpoints) or [Endpoint("", self.http_url, None, self.grpc_url)]

    def at(self, endpoint: Endpoint) -> Target:
        """This target on one endpoint alone (what a transport prepares, a poller asks)."""
        return dataclasses.replace(self, http_url=endpoint.http_url, grpc_url=endpoint.grpc_url, endpoints=[])

    @property
    def model_path(self) -> str:
        version = f"/versions/{self.model_version}" if self.model_version else ""
        return f"/v2/models/{self.model}{version}"


@dataclass
class TargetInfo:
    model_config: dict[str, Any]
    inputs: list[dict[str, Any]]  # name, datatype, shape (as the metadata gives it, -1 = variable)
    outputs: list[dict[str, Any]]
    max_batch_size: int
    triton_version: str | None = None
    versions: list[str] = field(default_factory=list)


async def _get(target: Target, path: str, method: str = "GET", body: bytes = b"") -> http1.Reply:
    try:
        return await http1.request(
            target.http_url, path, method=method, body=body, headers=target.headers,
            timeout_s=target.timeout_s,
        )
    except ValueError as exc:  # a malformed URL
        raise UserError(f"server URL: {exc}") from None
    except http1.ResponseTooLarge as exc:
        raise UserError(f"Triton at {target.http_url} answered {path} with {exc}") from None
    except (TimeoutError, OSError, http1.BadResponse) as exc:
        raise UserError(f"cannot reach Triton at {target.http_url}: {http1.describe_failure(exc)}") from None


def _json(reply: http1.Reply, what: str, target: Target) -> Any:
    try:
        return reply.json()
    except (ValueError, UnicodeDecodeError):
        raise UserError(f"{target.http_url} answered {what} with something that is not JSON (is it Triton?)") from None


async def _known_models(target: Target) -> list[str]:
    try:
        reply = await http1.request(
            target.http_url, "/v2/repository/index", method="POST", body=b"{}",
            headers=target.headers, timeout_s=target.timeout_s,
        )
        if reply.status != 200:
            return []
        index = reply.json()
    except Exception:  # the listing is a courtesy in an error message; never mask the real error
        return []
    names = {m.get("name") for m in index if isinstance(m, dict) and m.get("state", "READY") == "READY"}
    return sorted(n for n in names if isinstance(n, str))


async def describe_target(target: Target) -> TargetInfo:
    """Server readiness and version, the model's metadata and configuration.

    Raises UserError (one line) for an unreachable URL, a server that is not ready, an unknown
    model or version, or a model whose metadata we cannot use."""
    ready = await _get(target, "/v2/health/ready")
    if ready.status != 200:
        raise UserError(f"Triton at {target.http_url} is not ready (GET /v2/health/ready -> {ready.status})")
    server = await _get(target, "/v2")
    triton_version = None
    if server.status == 200:
        meta = _json(server, "GET /v2", target)
        if isinstance(meta, dict):
            triton_version = meta.get("version")
    metadata_reply = await _get(target, target.model_path)
    if metadata_reply.status != 200:
        known = await _known_models(target)
        listing = f" (models on this server: {', '.join(known)})" if known else ""
        what = f"model {target.model!r}" + (f" version {target.model_version!r}" if target.model_version else "")
        reason = http1.error_message(metadata_reply.body)
        raise UserError(f"{what} is not available at {target.http_url}: {reason}{listing}")
    metadata = _json(metadata_reply, f"GET {target.model_path}", target)
    config_reply = await _get(target, f"{target.model_path}/config")
    config: dict[str, Any] = {}
    if config_reply.status == 200:
        parsed = _json(config_reply, f"GET {target.model_path}/config", target)
        config = parsed if isinstance(parsed, dict) else {}
    return target_info_from(metadata, config, triton_version, target)


def target_info_from(
    metadata: Any, config: dict[str, Any], triton_version: str | None, target: Target
) -> TargetInfo:
    """Check the metadata's shape and build TargetInfo (pure: tested without a server)."""
    where = f"model {target.model!r} at {target.http_url}"
    if not isinstance(metadata, dict) or not isinstance(metadata.get("inputs"), list):
        raise UserError(f"{where}: metadata has no input list")
    inputs = []
    for tensor in metadata["inputs"]:
        if not (
            isinstance(tensor, dict)
            and isinstance(tensor.get("name"), str)
            and isinstance(tensor.get("datatype"), str)
            and isinstance(tensor.get("shape"), list)
        ):
            raise UserError(f"{where}: malformed input in metadata: {json.dumps(tensor)[:80]}")
        inputs.append({"name": tensor["name"], "datatype": tensor["datatype"], "shape": list(tensor["shape"])})
    if not inputs:
        raise UserError(f"{where}: the model has no inputs to send")
    outputs = [
        {"name": t["name"], "datatype": t.get("datatype", ""), "shape": list(t.get("shape", []))}
        for t in metadata.get("outputs", [])
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]
    max_batch = config.get("max_batch_size", 0)
    if not isinstance(max_batch, int):
        max_batch = 0
    versions = [str(v) for v in metadata.get("versions", []) if isinstance(v, (str, int))]
    return TargetInfo(
        model_config=config,
        inputs=inputs,
        outputs=outputs,
        max_batch_size=max_batch,
        triton_version=triton_version,
        versions=versions,
    )
