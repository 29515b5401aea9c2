"""Credentials never reach a recording.

The profile arrives already redacted in SessionStarted; this is the recorder's own second line:
any ``headers`` table keeps its names but loses its values, any ``scheme://user:password@host``
anywhere in any string (URLs, error messages) loses its user info, and any secret value the
session hands over (the profile's header values) is masked wherever it appears.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MASK = "***"
# scheme://userinfo@ : userinfo is everything up to '@' that is not '/', whitespace or '@'.
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@]+@")
# "Authorization: Bearer abc", "X-Api-Key=abc", "token: abc" inside free text.
_SECRET_ASSIGNMENT = re.compile(
    r"((?:authorization|proxy-authorization|x-api-key|api[-_]?key|token|password|secret)\"?'?\s*[:=]\s*\"?'?)"
    r"(?!unknown key\b|expected\b)"  # our own validation line about a key of that name: no value follows
    r"(?:bearer\s+|basic\s+)?[^\s\"',;}]+",
    re.IGNORECASE,
)
_MIN_SECRET_LEN = 4
_AUTH_SCHEMES = frozenset({"bearer", "basic", "digest", "token", "negotiate"})  # masking "a" everywhere would wreck the data and hide nothing


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        found: set[str] = set()
        for secret in secrets:
            if not isinstance(secret, str):
                continue
            # "Bearer abc123" is also masked where only "abc123" appears
            for part in [secret, *secret.split()]:
                if len(part) >= _MIN_SECRET_LEN and part.lower() not in _AUTH_SCHEMES:
                    found.add(part)
        # longest first so that a secret containing another is masked whole
        self._secrets = sorted(found, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        if "://" in value:
            value = _URL_USERINFO.sub(rf"\1{MASK}@", value)
        return _SECRET_ASSIGNMENT.sub(rf"\1{MASK}", value)

    def value(self, value: Any, key: str = "") -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            if key.lower() == "headers":
                return {str(k): MASK for k in value}
            return {k: self.value(v, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value
