"""A remote Triton's model control: load a config variant through the repository API
(``POST /v2/repository/models/<m>/load`` with a "config" parameter, Triton's JSON model config).

The variant's instance groups replace those of the config the server runs now, so a server that
runs the model on another backend or platform than our files (ONNX Runtime vs the Python backend)
keeps its own; only where the server's config cannot be read is the variant file sent whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.errors import RunFailed, UserError
from engine.net import http1
from engine.redact import Redactor
from engine.server.repository import EMBEDDED_ROOT, REPOSITORY_ROOT, variant_files
from engine.study.pbtxt import pbtxt_to_json

LOAD_TIMEOUT_S = 600.0  # loading a model onto 8 GPUs takes a while
MAX_REPLY_BYTES = 16 << 20  # a config or load answer past this is not Triton's (response_too_large)


class NoModelControl(Exception):
    """The server refuses explicit loads (started without --model-control-mode=explicit)."""


def variant_sources(model: str) -> dict[str, Path]:
    """The variant files for a remote model: model_repository/<m>/ (the NVIDIA-container layout),
    else the embedded copy."""
    for folder in (REPOSITORY_ROOT / model, EMBEDDED_ROOT / model):
        if folder.is_dir() and (folder / "config.pbtxt").is_file():
            return variant_files(folder)
    return {}


def _request(method: str, url: str, headers: dict[str, str], body: Any = None,
             timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    server = url.split("/v2")[0]
    try:
        reply = http1.request_blocking(url, method=method, body=json.dumps(body).encode() if body is not None else b"",
                                       headers=headers, timeout_s=timeout, max_bytes=MAX_REPLY_BYTES)
    except http1.ResponseTooLarge:
        raise RunFailed(f"server {server}: response_too_large: more than {MAX_REPLY_BYTES >> 20} MiB") from None
    except ValueError as exc:  # a malformed URL
        raise RunFailed(f"server {server}: {exc}") from None
    except (OSError, http1.BadResponse) as exc:
        raise RunFailed(f"server {server}: {http1.describe_failure(exc)}") from None
    try:
        return reply.status, json.loads(reply.body) if reply.body else {}
    except ValueError:
        return reply.status, {"error": reply.body.decode(errors="replace")[:200]}


def _said(answer: dict[str, Any], headers: dict[str, str]) -> str:
    """The server's error text, one line, without any credential we sent it (it may echo them)."""
    return Redactor(headers.values()).text(" ".join(str(answer.get("error") or answer).split()))


def current_config(http_url: str, model: str, headers: dict[str, str]) -> dict[str, Any] | None:
    status, body = _request("GET", f"{http_url}/v2/models/{model}/config", headers)
    return body if status == 200 and isinstance(body, dict) and body else None


def override_for(variant_config: dict[str, Any], running: dict[str, Any] | None) -> dict[str, Any]:
    """The config to load: the running one with the variant's instance groups (pure)."""
    if not running:
        return variant_config
    merged = {k: v for k, v in running.items()}
    merged["instance_group"] = variant_config.get("instance_group", [])
    return merged


def _group_fields(group: Any) -> tuple[str | None, int, tuple[int, ...] | None]:
    """(kind, count, GPUs) of one instance group as JSON; None where it does not say (pure)."""
    if not isinstance(group, dict):
        return None, -1, None
    kind = group.get("kind")
    kind = None if kind in (None, "", "KIND_AUTO") else str(kind)
    count = group.get("count", 1)
    count = count if isinstance(count, int) and not isinstance(count, bool) else -1
    gpus = group.get("gpus")
    listed = tuple(sorted(g for g in gpus if isinstance(g, int))) if isinstance(gpus, list) and gpus else None
    return kind, count, listed


def groups_match(wanted: Any, found: Any) -> bool:
    """Whether the server's instance groups are the ones we loaded: as many groups, each with our
    count, and our kind and GPUs where we named them (Triton fills in what we left out) (pure)."""
    if not isinstance(wanted, list) or not isinstance(found, list) or len(wanted) != len(found):
        return False
    for ours, theirs in zip(map(_group_fields, wanted), map(_group_fields, found), strict=True):
        kind, count, gpus = ours
        if count != theirs[1] or (kind is not None and kind != theirs[0]) or (gpus is not None and gpus != theirs[2]):
            return False
    return True


def describe_groups(groups: Any) -> str:
    """"2 x KIND_GPU on GPUs 0,1": one line for a mismatch."""
    if not isinstance(groups, list):
        return "no config"
    parts = []
    for kind, count, gpus in map(_group_fields, groups):
        on = f" on GPUs {','.join(map(str, gpus))}" if gpus else ""
        parts.append(f"{count if count >= 0 else '?'} x {kind or 'any kind'}{on}")
    return "; ".join(parts) or "no instance groups"


def load_variant(http_url: str, model: str, variant: str, source: Path, headers: dict[str, str]) -> dict[str, Any]:
    """Load ``variant`` (from ``source``) on the server; returns the config sent. Raises
    NoModelControl when the server does not allow explicit loads, RunFailed when the load fails."""
    config = override_for(pbtxt_to_json(source.read_text()), current_config(http_url, model, headers))
    body = {"parameters": {"config": json.dumps(config)}}
    status, answer = _request("POST", f"{http_url}/v2/repository/models/{model}/load", headers, body, LOAD_TIMEOUT_S)
    if status == 200:
        loaded = current_config(http_url, model, headers)  # what the server runs now, not what it accepted
        wanted = config.get("instance_group", [])
        found = loaded.get("instance_group", []) if loaded else None
        if not groups_match(wanted, found):
            raise RunFailed(f"variant {variant}: the server accepted the load but runs other instance groups "
                            f"({describe_groups(found)}; asked for {describe_groups(wanted)})")
        return config
    message = _said(answer, headers)
    if "not allowed" in message.lower():
        raise NoModelControl(message)
    raise RunFailed(f"loading variant {variant} of {model} through the repository API failed: {message}")


def check_model_control(http_url: str, model: str, headers: dict[str, str]) -> bool:
    """Whether the server takes explicit loads, without changing what it serves: reload the
    running config as it is (Triton answers "not allowed" at once when model control is off)."""
    running = current_config(http_url, model, headers)
    if running is None:
        status, _ = _request("GET", f"{http_url}/v2/health/live", headers)
        if status != 200:
            raise RunFailed(f"server {http_url} is not live (HTTP {status})")
        raise UserError(f"server {http_url} does not serve model {model!r}")
    body = {"parameters": {"config": json.dumps(running)}}
    status, answer = _request("POST", f"{http_url}/v2/repository/models/{model}/load", headers, body, LOAD_TIMEOUT_S)
    if status == 200:
        return True
    if "not allowed" in str(answer.get("error", "")).lower():
        return False
    raise RunFailed(f"model control check on {http_url}: {_said(answer, headers)}")
