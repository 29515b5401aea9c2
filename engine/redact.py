"""Credentials never reach a recording.

The profile arrives already redacted in SessionStarted; this is the recorder's own second line:
any ``headers`` table keeps its names but loses its values, any ``scheme://user:password@host``
anywhere in any string (URLs, error messages) loses its user info, and any secret value the
session hands over (the profile's header values) is masked wherever it appears.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from typing import Any, TypeVar
from urllib.parse import quote

import msgspec

MASK = "***"
S = TypeVar("S", bound=msgspec.Struct)
# scheme://userinfo@ : userinfo is everything up to '@' that is not '/', whitespace or '@'.
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@]+@")
# user:password whose password holds '/' or spaces: everything from the scheme to the first '@'
# (a URL with a port and an '@' later in the text loses its host too: more masked, never less)
_URL_USERINFO_LOOSE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@:]*:[^@\n]{0,256}?@")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")
_QUERY_VALUE = re.compile(r"([?&;][^=&;#?\s]+=)[^&;#\s]+")
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
            # "Bearer abc123" is also masked where only "abc123" appears; so is what a server may
            # echo of it: the password inside a Basic token, percent- or JSON-escaped forms
            for part in [secret, *secret.split(), *_basic_credentials(secret)]:
                if len(part) >= _MIN_SECRET_LEN and part.lower() not in _AUTH_SCHEMES:
                    found.update({part, quote(part, safe=""), quote(part), json.dumps(part)[1:-1]})
        # longest first so that a secret containing another is masked whole
        self._secrets = sorted(found, key=len, reverse=True)

    def fields(self, obj: S) -> S:
        """A Struct (an event) with its text fields and lists of text redacted; ``obj`` itself
        when nothing needed masking."""
        changes: dict[str, str | list[str]] = {}
        for name in obj.__struct_fields__:
            value = getattr(obj, name)
            clean: str | list[str]
            if isinstance(value, str) and value:
                clean = self.text(value)
            elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                clean = [self.text(v) for v in value]
            else:
                continue
            if clean != value:
                changes[name] = clean
        return msgspec.structs.replace(obj, **changes) if changes else obj

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        if "://" in value:
            value = _URL_USERINFO.sub(rf"\1{MASK}@", value)
            value = _URL_USERINFO_LOOSE.sub(rf"\1{MASK}@", value)
            value = _URL.sub(lambda m: _QUERY_VALUE.sub(rf"\1{MASK}", m.group(0)), value)
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


def _basic_credentials(secret: str) -> list[str]:
    """"Basic dXNlcjpwdw==": the "user:pw" it carries and the password alone (what a server that
    decodes it may echo); nothing for any other value."""
    scheme, _, token = secret.strip().partition(" ")
    if scheme.lower() != "basic" or not token:
        return []
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return []
    _user, sep, password = decoded.partition(":")
    return [decoded, password] if sep else [decoded]
