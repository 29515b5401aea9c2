"""An OpenAI-compatible server before a sweep: its API key, its models (``GET /v1/models``) and the
one measured, each failure one line (a UserError: exit 2).

The key comes from a file (load.api_key_file) or an environment variable (load.api_key_env,
OPENAI_API_KEY by default); it is sent as ``Authorization: Bearer`` to the URL's own host:port
only (every request of the sweep goes there), and is never in the profile: the session hands it to
the recording's redactor so that no line that quotes it is kept.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from engine.errors import UserError
from engine.net.http1 import BadResponse, describe_failure, request
from engine.profiles import Model

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
MAX_KEY_BYTES = 4096
NOT_NAMED = Model().name  # model.name left at the profile's default: the server's first model is measured


@dataclass(frozen=True)
class OpenAiTarget:
    url: str  # the API's base, http://host:port/v1
    model: str
    served: tuple[str, ...]  # every model /v1/models listed


def api_key(key_env: str, key_file: str) -> str | None:
    """The API key: load.api_key_file's first line, else load.api_key_env's value; None when neither."""
    if key_file:
        where = Path(key_file).expanduser()
        try:
            with open(where, "rb") as f:
                raw = f.read(MAX_KEY_BYTES + 1)
        except OSError as exc:
            raise UserError(f"load.api_key_file: {key_file}: cannot read it: {exc.strerror or exc}") from None
        if len(raw) > MAX_KEY_BYTES:
            raise UserError(f"load.api_key_file: {key_file}: more than {MAX_KEY_BYTES} bytes, not an API key")
        lines = raw.decode("utf-8", "replace").strip().splitlines()
        key = lines[0].strip() if lines else ""
        if not key:
            raise UserError(f"load.api_key_file: {key_file}: empty")
        return _header_safe(key, "load.api_key_file")
    value = os.environ.get(key_env or DEFAULT_KEY_ENV, "").strip()
    return _header_safe(value, f"the environment variable {key_env or DEFAULT_KEY_ENV}") if value else None


def _header_safe(key: str, where: str) -> str:
    if any(c in key for c in "\r\n\0") or not key.isprintable():
        raise UserError(f"{where}: the API key holds characters a header cannot carry")
    return key


def auth_headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


async def open_target(url: str, wanted: str, key: str | None, timeout_s: float = 10.0) -> OpenAiTarget:
    """The server's models, and the one measured: ``wanted`` when it is served (one line naming
    those served when it is not), the first when ``wanted`` is the profile's default."""
    base = url.rstrip("/")
    try:
        reply = await request(base, "/models", headers=auth_headers(key), timeout_s=timeout_s)
    except (OSError, TimeoutError, BadResponse) as exc:
        raise UserError(f"{base}/models: cannot reach the server: {describe_failure(exc)}") from None
    if reply.status == 401:
        raise UserError(f"the server refused the API key (HTTP 401 from {base}/models)" if key else
                        f"the server asks for an API key (HTTP 401 from {base}/models): set {DEFAULT_KEY_ENV}, "
                        "load.api_key_env or load.api_key_file")
    served = _model_ids(reply.body) if reply.status == 200 else None
    if served is None:
        raise UserError(f"{base}/models: not an OpenAI-compatible server (HTTP {reply.status}, expected "
                        "{\"object\": \"list\", \"data\": [{\"id\": ...}]})")
    if not served:
        raise UserError(f"{base}/models: the server serves no model")
    if wanted in served:
        return OpenAiTarget(base, wanted, served)
    if wanted == NOT_NAMED:
        return OpenAiTarget(base, served[0], served)
    raise UserError(f"model.name: the server does not serve {wanted!r}; it serves {', '.join(served[:20])}")


def _model_ids(body: bytes) -> tuple[str, ...] | None:
    """The ids of an OpenAI model list; None when the body is not one."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
        return None
    return tuple(m["id"] for m in data)
