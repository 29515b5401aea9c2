"""A sweep's servers (endpoints): made from the profile's URL lists, and the checks before any load
(each server once, judged by where its URL leads; the same model config on each), one line each,
naming the endpoint. How a level's load spreads over them is engine/load/spread.py.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

from engine.errors import UserError
from engine.triton.target import Endpoint, Target, TargetInfo, describe_target

# model config keys that differ between servers serving the same model the same way
IGNORED_CONFIG_KEYS = ("name",)
# an instance group's placement: which GPU(s) it runs on, not what runs there (one-GPU servers
# on GPUs 0 and 1 are alike)
PLACEMENT_KEYS = ("gpus",)


def endpoints_from(urls: list[str], metrics_urls: list[str] | None = None,
                   grpc_urls: list[str] | None = None) -> list[Endpoint]:
    """Endpoints ep1..epN from URL lists (metrics and gRPC optional, else one per URL). Raises
    UserError for a duplicate endpoint or lists of different lengths."""
    metrics = list(metrics_urls or [])
    grpc = list(grpc_urls or [])
    for what, given in (("metrics URLs", metrics), ("gRPC URLs", grpc)):
        if given and len(given) != len(urls):
            raise UserError(f"endpoints: expected one of the {what} per server URL ({len(urls)}), found {len(given)}")
    seen: dict[str, int] = {}
    for i, url in enumerate(urls):
        key = url.rstrip("/").lower()
        if key in seen:
            raise UserError(f"endpoint ep{i + 1} ({url}) duplicates ep{seen[key] + 1}: each server once")
        seen[key] = i
    return [Endpoint(f"ep{i + 1}", url, metrics[i] if metrics else None, grpc[i] if grpc else "")
            for i, url in enumerate(urls)]












async def check_distinct(endpoints: list[Endpoint]) -> None:
    """Each server once, judged by where its URL leads, not by the URL's text: the addresses its
    host resolves to, with its port (127.0.0.1 and localhost are one server; counted twice, its
    throughput, statistics and GPUs would all be doubled). A host that does not resolve is left to
    the connection, which names it."""
    loop = asyncio.get_running_loop()

    async def places(ep: Endpoint) -> set[tuple[str, int]]:
        parts = urlsplit(ep.http_url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            found = await loop.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
        except (OSError, ValueError, UnicodeError):
            return set()
        return {(_same_address(str(info[4][0])), port) for info in found}

    resolved = await asyncio.gather(*(places(ep) for ep in endpoints))
    for i, ep in enumerate(endpoints):
        for j in range(i):
            if resolved[i] & resolved[j]:
                address, port = sorted(resolved[i] & resolved[j])[0]
                raise UserError(f"endpoint {ep.name} ({ep.http_url}) is the same server as {endpoints[j].name} "
                                f"({endpoints[j].http_url}): both lead to {address} port {port}; give each server once")


def _same_address(address: str) -> str:
    """An address in one spelling (an IPv4-mapped IPv6 address as IPv4)."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf by its path; a list of objects by index ("instance_group[0].count"), so that a
    difference is named by its key, not shown as the whole list cut short."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_leaves(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return {k: v for i, item in enumerate(value) for k, v in _leaves(item, f"{prefix}[{i}]").items()}
    return {prefix: value}


def _without_placement(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with each instance group's GPUs left out (the count, kind and the rest stay)."""
    groups = config.get("instance_group")
    if not isinstance(groups, list):
        return config
    return {**config, "instance_group": [{k: v for k, v in g.items() if k not in PLACEMENT_KEYS}
                                         if isinstance(g, dict) else g for g in groups]}


def config_mismatch(endpoints: list[Endpoint], configs: list[dict[str, Any]]) -> str | None:
    """The first model config key that differs between endpoints, as a line; None when they agree.
    Where the instance groups are placed (their GPUs) is no difference."""
    flat = [_leaves({k: v for k, v in _without_placement(c).items() if k not in IGNORED_CONFIG_KEYS})
            for c in configs]
    for key in sorted({k for f in flat for k in f}):
        values = [f.get(key) for f in flat]
        if any(v != values[0] for v in values[1:]):
            shown = ", ".join(f"{ep.name} {v!r:.40}" for ep, v in zip(endpoints, values, strict=True))
            return f"model config differs in {key}: {shown}"
    return None


async def describe_endpoints(target: Target, allow_mixed: bool = False) -> TargetInfo:
    """describe_target on every endpoint; the first's answer. Raises UserError naming the
    endpoint that cannot be reached or used, or (unless ``allow_mixed``) when the model's configs
    differ: figures spread over unlike servers are not apples-to-apples."""
    endpoints = target.endpoint_list()
    if len(endpoints) == 1:
        return await describe_target(target)
    await check_distinct(endpoints)

    async def one(ep: Endpoint) -> TargetInfo:
        try:
            return await describe_target(target.at(ep))
        except UserError as exc:
            raise UserError(f"endpoint {ep.name} ({ep.http_url}): {exc}") from None

    answers = await asyncio.gather(*(one(ep) for ep in endpoints), return_exceptions=True)
    for answer in answers:  # the first endpoint in order that failed is named
        if isinstance(answer, BaseException):
            raise answer
    infos = [a for a in answers if isinstance(a, TargetInfo)]
    if not allow_mixed and (line := config_mismatch(endpoints, [i.model_config for i in infos])):
        raise UserError(f"endpoints are not apples-to-apples: {line} (--allow-mixed measures them together anyway)")
    return infos[0]
