"""The sweep's target from the profile: the server(s) it names, or the embedded one the session
started; described (the model's inputs, Triton's version), checked against load.input_shapes,
and announced as ServerReady.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from engine import events as ev
from engine.errors import UserError
from engine.profiles import Profile, headers_for, redact_url
from engine.triton.endpoints import describe_endpoints, endpoints_from
from engine.triton.target import Endpoint, Target, TargetInfo


class Member(Protocol):
    """One server of a scale-out (engine/server/supervisor.FleetMember)."""

    @property
    def http_url(self) -> str: ...
    @property
    def metrics_url(self) -> str | None: ...
    @property
    def grpc_url(self) -> str | None: ...
    @property
    def gpu(self) -> int | None: ...


class Started(Protocol):
    """An embedded server the session started (engine/server/supervisor.Served)."""

    @property
    def http_url(self) -> str: ...
    @property
    def metrics_url(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def log_path(self) -> str: ...
    @property
    def mps(self) -> bool | None: ...
    @property
    def mps_why(self) -> str: ...
    @property
    def fleet(self) -> Sequence[Member]: ...


def check_input_shapes(wanted: dict[str, list[int]], info: TargetInfo) -> None:
    """load.input_shapes against what the server says the model takes: a wrong shape is bad input
    (one line, exit 2), not a sweep of failed requests."""
    inputs = {t["name"]: list(t["shape"]) for t in info.inputs}
    batched = info.max_batch_size > 0
    for name, dims in wanted.items():
        if name not in inputs:
            raise UserError(f"load.input_shapes.{name}: expected one of the model's inputs "
                            f"({', '.join(sorted(inputs))}), found {name!r}")
        declared = inputs[name][1:] if batched else inputs[name]
        fits = len(declared) == len(dims) and all(d < 0 or d == x for d, x in zip(declared, dims, strict=True))
        if not fits:
            raise UserError(f"load.input_shapes.{name}: expected a shape matching {declared} (-1 = any), "
                            f"found {dims}")


def fleet_endpoints(fleet: Sequence[Member]) -> list[Endpoint]:
    """A scale-out's servers as the load engine's endpoints: each with its own metrics (GPU
    telemetry, when on GPUs) and the GPU it is pinned to."""
    return [Endpoint(f"ep{i + 1}", one.http_url, one.metrics_url, one.grpc_url or "",
                     gpus=(one.gpu,) if one.gpu is not None else (),
                     server_gpu=0 if one.gpu is not None else None)  # each sees only its GPU
            for i, one in enumerate(fleet)]


def endpoint_words(ep: Endpoint) -> str:
    """"ep2 http://127.0.0.1:8010 (GPU 1)": an endpoint as ServerReady names it, with the GPU(s)
    it is pinned to where known."""
    gpus = f" (GPU{'s' if len(ep.gpus) > 1 else ''} {', '.join(map(str, ep.gpus))})" if ep.gpus else ""
    return f"{ep.name} {redact_url(ep.http_url)}{gpus}"


def target_endpoints(profile: Profile, started: Started | None) -> list[Endpoint]:
    """Several servers (server.urls, or a scale-out's): the load spread over them; else none."""
    if started is not None:
        return fleet_endpoints(started.fleet) if started.fleet else []
    server = profile.server
    urls = server.endpoint_urls()
    return endpoints_from(urls, server.metrics_urls) if len(urls) > 1 else []


async def open_target(profile: Profile, started: Started | None,
                      publish: Callable[[ev.Event], None]) -> tuple[Target, TargetInfo]:
    """The target of the profile's model on ``started`` (None: the profile's remote server(s)),
    described and checked; ServerReady says what it is."""
    server, model = profile.server, profile.model
    endpoints = target_endpoints(profile, started)
    metrics_url: str | None
    log_path: str | None
    if started is not None:
        http_url, metrics_url, variant, log_path = started.http_url, started.metrics_url, started.variant, started.log_path
        mps, mps_why = started.mps, started.mps_why
    else:
        http_url, variant, log_path = server.endpoint_urls()[0], model.variant, None
        metrics_url = next(iter(server.endpoint_metrics_urls()), None)
        mps, mps_why = None, ""
    target = Target(http_url=http_url, model=model.name, model_version=model.version,
                    headers=headers_for(server, *server.endpoint_urls()),
                    input_shapes={k: list(v) for k, v in profile.load.input_shapes.items()}, endpoints=endpoints)
    info = await describe_endpoints(target, server.allow_mixed)
    check_input_shapes(profile.load.input_shapes, info)
    publish(ev.ServerReady(
        http_url=redact_url(http_url) or "",
        metrics_url=redact_url(metrics_url),
        embedded=server.kind == "embedded",
        model=model.name,
        model_version=model.version,
        config_variant=variant,
        triton_version=info.triton_version,
        model_config=info.model_config or {},
        inputs=list(info.inputs or []),
        log_path=log_path,
        mps=mps,
        mps_why=mps_why,
        endpoints=[endpoint_words(ep) for ep in endpoints],
        transport=profile.load.transport,
    ))
    return target, info
