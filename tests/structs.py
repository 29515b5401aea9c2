"""``replace`` for the tests, which change events (msgspec Structs) and profiles and figures
(dataclasses) alike: one name for both."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")


def replace(obj: T, **changes: Any) -> T:
    if isinstance(obj, msgspec.Struct):
        return msgspec.structs.replace(obj, **changes)
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
