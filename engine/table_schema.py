"""Tables declared once: a dataclass whose fields carry their type and constraints.

A field's annotation is its whole declaration: the type, msgspec's ``Meta`` bounds (``ge``,
``le``, ``min_length``, ``pattern``, a ``description`` of what is expected), and a ``Check`` for a
rule no bound can say (a URL's form, an IP address). msgspec checks a parsed document against
them; this module turns its finding into the key, what was expected and the value found, and
reads a table back leniently (a recording's copy: a key missing or of another type keeps its
default). Nothing else lists the keys: unknown-key errors, ``--set``'s list detection and the
recorded profile's typed reading all come from the dataclasses.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, TypeVar, Union

import msgspec
from msgspec import Meta

NOT_A_KEY = {"key": False}  # dataclasses.field(metadata=NOT_A_KEY): set by the code, never by a file
T = TypeVar("T")
_MSGSPEC_PATH = re.compile(r" - at `\$(.*)`$")
_PATH_PART = re.compile(r"\.([^.\[]+)|\[([^\]]*)\]")


@dataclass(frozen=True)
class Check:
    """A rule beyond msgspec's bounds: returns what was expected when the value is wrong, else
    None. It sees any value a document may hold (a number where a URL belongs, too)."""

    rule: Callable[[object], str | None]


class Mismatch(ValueError):
    """A value that is not what its key declares: the dotted key, the expected text, the value."""

    def __init__(self, key: str, expected: str, found: object) -> None:
        super().__init__(f"{key}: expected {expected}")
        self.key, self.expected, self.found = key, expected, found


class UnknownKey(ValueError):
    """A key no field declares: the dotted key and the keys its table knows."""

    def __init__(self, key: str, known: list[str]) -> None:
        super().__init__(f"{key}: unknown key")
        self.key, self.known = key, known


# --------------------------------------------------------------------------- reading the declarations


@dataclass(frozen=True)
class _Declared:
    base: Any  # the type without Optional and Annotated
    meta: Meta  # the field's own bounds (the outermost Annotated's, merged)
    checks: tuple[Check, ...]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


@functools.cache
def _plain_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _key_fields(cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("key", True)]


def keys(cls: type) -> list[str]:
    """The keys a table declares, in declaration order."""
    return [f.name for f in _key_fields(cls)]


def _is_table(tp: object) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def tables(cls: type) -> dict[str, type]:
    """The sub-tables a table declares: key -> dataclass (a profile's [hardware], [load], ...)."""
    return {name: tp for name, tp in _plain_hints(cls).items() if name in keys(cls) and _is_table(tp)}


def _without_none(tp: Any) -> Any:
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


def _declared(cls: type, name: str) -> _Declared:
    tp = _without_none(_hints(cls)[name])
    metas: list[Meta] = []
    checks: list[Check] = []
    if typing.get_origin(tp) is Annotated:
        metas = [m for m in tp.__metadata__ if isinstance(m, Meta)]
        checks = [c for c in tp.__metadata__ if isinstance(c, Check)]
        tp = tp.__origin__
    merged = {k: getattr(m, k) for m in metas for k in ("ge", "gt", "le", "lt", "min_length", "description", "extra")
              if getattr(m, k) is not None}
    return _Declared(tp, Meta(**merged), tuple(checks))


def is_list(cls: type, name: str) -> bool:
    """Whether a key of the table holds a list (``--set load.concurrency=8`` means [8])."""
    return name in keys(cls) and typing.get_origin(_declared(cls, name).base) is list


# --------------------------------------------------------------------------- what was expected


def _base_text(d: _Declared) -> str:
    base, meta = d.base, d.meta
    if meta.description:
        return meta.description
    if base is bool:
        return "true or false"
    if typing.get_origin(base) is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(base))
    if isinstance(base, type) and issubclass(base, Enum):
        return "one of " + ", ".join(repr(m.value) for m in base)
    if base is int:
        if meta.gt == 0 or meta.ge == 1:
            return "a positive integer"
        return f"an integer >= {meta.ge}" if meta.ge is not None else "an integer"
    if base is float:
        bound = f" > {meta.gt:g}" if meta.gt is not None else f" >= {meta.ge:g}" if meta.ge is not None else ""
        return f"a finite number{bound}"
    if base is str:
        return "a non-empty string" if meta.min_length else "a string"
    if _is_table(base):
        return "a table"
    return f"a {getattr(base, '__name__', base)}"


def expected_text(cls: type, name: str, value: object) -> str:
    """What the key ``name`` of ``cls`` expects, worded for the value found: its Check's words,
    "a value up to N" for a number past its upper bound, else the declaration's words."""
    d = _declared(cls, name)
    for check in d.checks:
        if (said := check.rule(value)) is not None:
            return said
    past_bound = (d.meta.le is not None and isinstance(value, (int, float)) and not isinstance(value, bool)
                  and math.isfinite(value) and value > d.meta.le)
    if past_bound:
        unit = (d.meta.extra or {}).get("unit", "")
        return f"a value up to {d.meta.le:.0f}{unit}"
    return _base_text(d)


# --------------------------------------------------------------------------- checking a document


def _check_keys(cls: type, raw: Mapping[str, Any], prefix: str) -> None:
    known = keys(cls)
    for key in raw:
        if key not in known:
            raise UnknownKey(f"{prefix}{key}", known)
    for key, table in tables(cls).items():
        if isinstance(raw.get(key), Mapping):
            _check_keys(table, raw[key], f"{prefix}{key}.")


def _mismatch(cls: type, data: Mapping[str, Any], error: msgspec.ValidationError) -> Mismatch:
    """msgspec's finding ("Expected `int` >= 1 - at `$.load.batch_size`") as the key it is about."""
    match = _MSGSPEC_PATH.search(str(error))
    parts = [a or b for a, b in _PATH_PART.findall(match.group(1))] if match else []
    owner, value, dotted = cls, data, []
    while parts and isinstance(value, Mapping) and parts[0] in keys(owner):
        name = parts.pop(0)
        dotted.append(name)
        value = value[name]
        inner = _plain_hints(owner)[name]
        if not _is_table(inner) or not isinstance(value, Mapping):
            break
        owner = inner
    if not dotted:  # not found by its path: shown as the whole document's problem
        return Mismatch("", str(error).partition(" - at ")[0], data)
    name = dotted[-1]
    if _is_table(_plain_hints(owner)[name]):
        return Mismatch(".".join(dotted), f"a table [{'.'.join(dotted)}]", value)
    return Mismatch(".".join(dotted), expected_text(owner, name, value), value)


def _run_checks(obj: object, raw: Mapping[str, Any], prefix: str) -> None:
    """The Checks of the keys the document sets (a default is not the document's to answer for)."""
    cls = type(obj)
    for name in keys(cls):
        if name not in raw:
            continue
        value = getattr(obj, name)
        if _is_table(type(value)):
            _run_checks(value, raw[name], f"{prefix}{name}.")
        elif value is not None:
            for check in _declared(cls, name).checks:
                if check.rule(value) is not None:  # worded for the value as the document wrote it
                    raise Mismatch(f"{prefix}{name}", expected_text(cls, name, raw[name]), raw[name])


def parse(cls: type[T], data: Mapping[str, Any], **code_set: object) -> T:
    """A parsed document as ``cls``, every key checked against its declaration. ``code_set``:
    fields the code sets (NOT_A_KEY ones, like where the document came from). Raises
    UnknownKey or Mismatch, each naming the dotted key."""
    _check_keys(cls, data, "")
    try:
        obj = msgspec.convert({**data, **code_set}, cls, strict=True)
    except msgspec.ValidationError as exc:
        raise _mismatch(cls, data, exc) from None
    _run_checks(obj, data, "")
    return obj


# --------------------------------------------------------------------------- reading a recorded copy


def _finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def read_lenient(cls: type[T], data: object) -> T:
    """A table as a recording holds it: each key of its declared type (bounds aside: the
    recording was checked when it was made, perhaps by an older version's rules), else its
    default, as for a key an older version did not write or a doctored file spoilt."""
    raw = data if isinstance(data, Mapping) else {}
    hints = _plain_hints(typing.cast(type, cls))
    values: dict[str, Any] = {}
    for name in hints:  # the fields the code sets (NOT_A_KEY) too: the recording holds them
        if name not in raw:
            continue
        tp = hints[name]
        if _is_table(tp):
            values[name] = read_lenient(tp, raw[name])
            continue
        try:
            value = msgspec.convert(raw[name], tp, strict=True)
        except msgspec.ValidationError:
            continue
        if _finite(value):
            values[name] = value
    return cls(**values)
