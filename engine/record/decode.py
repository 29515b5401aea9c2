"""Fast decoding of recorded events.

``engine.events.event_from_dict`` resolves type hints on every call: about 4 ms for one 8-GPU
GpuSample, 15 s for an hour of them, which would make replay seeks and reports crawl. This
decoder follows the same rules (same classes, same version checks, unknown fields ignored) but
compiles each class's field decoders once. tests/record/test_decode.py checks that it gives
the very same events as ``event_from_dict`` for every event kind.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from typing import Any, Union

from engine.events import SCHEMA_VERSION, Event, EventSchemaError, event_kinds

Decoder = Callable[[Any], Any]
ABSURD = 1e100  # no measurement is this large; beyond it, arithmetic in the reports overflows to inf


class _WrongType(TypeError):
    """A recorded value of the wrong type: the event is malformed (one line, not a traceback)."""


def _scalar_check(tp: Any) -> Decoder | None:
    """A check for a JSON scalar of type ``tp`` (bool is not a number here, as in JSON)."""
    if tp in (float, int):  # an int field holding 3.0 was readable before: numbers stay numbers
        def number(value: Any) -> Any:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) > ABSURD:
                raise _WrongType(f"expected a number, found {value!r:.40}")
            return value
        return number
    if tp in (str, bool):
        def exact(value: Any) -> Any:
            if not isinstance(value, tp):
                raise _WrongType(f"expected a {tp.__name__}, found {value!r:.40}")
            return value
        return exact
    if typing.get_origin(tp) is dict or tp is dict:
        def mapping(value: Any) -> Any:
            if not isinstance(value, dict):
                raise _WrongType(f"expected a table, found {value!r:.40}")
            return value
        return mapping
    return None


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType) and type(None) in typing.get_args(tp)


@functools.cache
def _compile(tp: Any) -> Decoder | None:
    """A function that rebuilds ``tp`` from JSON values (and checks their types), or None where
    the value is used as is."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _compile(args[0]) if args else None  # as events._decode: the first non-None type
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        fields = [f for f in dataclasses.fields(tp) if f.init]
        plan = {f.name: _compile(hints[f.name]) for f in fields}
        # a None where the type has no None (and no default to fall back on) breaks every reader
        required = frozenset(f.name for f in fields if not _optional(hints[f.name]) and hints[f.name] is not Any)

        def decode_dataclass(value: Any) -> Any:
            if not isinstance(value, dict):
                raise _WrongType(f"expected a {tp.__name__} table, found {value!r:.40}")
            kwargs: dict[str, Any] = {}
            for key, item in value.items():
                if key in plan:
                    inner = plan[key]
                    if item is None:
                        if key in required:
                            raise _WrongType(f"{key}: expected a value, found None")
                        kwargs[key] = None
                        continue
                    try:
                        kwargs[key] = inner(item) if inner is not None else item
                    except _WrongType as exc:
                        raise _WrongType(f"{key}: {exc}") from None
            return tp(**kwargs)

        return decode_dataclass
    if origin is list:
        (arg,) = typing.get_args(tp) or (Any,)
        inner = _compile(arg)

        def decode_list(value: Any) -> Any:
            if not isinstance(value, list):
                raise _WrongType(f"expected a list, found {value!r:.40}")
            if inner is None:
                return value
            return [None if v is None else inner(v) for v in value]

        return decode_list
    return _scalar_check(tp)


def check_version(data: dict[str, Any]) -> None:
    version = data.get("v", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise EventSchemaError(f"event schema version {version!r} is newer than this tool's ({SCHEMA_VERSION})")


def decode_event(data: dict[str, Any]) -> Event:
    """Same contract as ``engine.events.event_from_dict``."""
    check_version(data)
    kind = data.get("kind")
    cls = event_kinds().get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventSchemaError(f"unknown event kind {kind!r}")
    decoder = _compile(typing.cast(Any, cls))  # a type is hashable; mypy reads Event's __hash__ = None
    assert decoder is not None
    try:
        return decoder({k: v for k, v in data.items() if k not in ("kind", "v")})
    except TypeError as exc:
        raise EventSchemaError(f"malformed {kind} event: {exc}") from None
