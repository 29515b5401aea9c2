"""How runs are told apart, for `compare` and `merge` alike: repeated names numbered, and model
configs flattened so that a difference names its field."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def unique_names(names: Sequence[str], mark: str = "#") -> list[str]:
    """The names, a repeated one numbered after ``mark`` (two pods of one name, or runs on one box:
    "a#1", "a#2"); a name said once stays as it is."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if names.count(name) == 1 else f"{name}{mark}{seen[name]}")
    return out


def config_leaves(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A model config flattened to dotted keys, so that a difference names its field
    ("parameters.cpu_threads: 2 vs 1"), not the whole section, however its keys were ordered.
    Triton's parameter values ({"string_value": "2"}) read as their value; a list, or an empty
    table (``dynamic_batching {}`` turns batching on), is one value."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and set(value) == {"string_value"}:
            out[name] = value["string_value"]
        elif isinstance(value, Mapping) and value:
            out.update(config_leaves(value, name + "."))
        else:
            out[name] = json.dumps(value, sort_keys=True, default=str) if isinstance(value, (list, dict)) else value
    return out
