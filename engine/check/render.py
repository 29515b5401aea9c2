"""The check as plain text for people (fixed columns, no colours: it goes to logs and to
boxes without the TUI stack) and as JSON for scripts."""

from __future__ import annotations

import json
from typing import Any

from engine.events import BoxCheck

MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "n/a": "n/a "}


def checked_gpus_line(facts: dict[str, Any]) -> str | None:
    """Which GPUs were checked, where CUDA_VISIBLE_DEVICES leaves only some of the machine's."""
    machine = int(facts.get("machine_gpus") or 0)
    indices = [g["index"] for g in facts.get("gpus", [])]
    if facts.get("cuda_visible") is None or not machine or len(indices) == machine:
        return None
    which = f"GPU{'s' if len(indices) > 1 else ''} {', '.join(map(str, indices))}" if indices else "no GPU"
    return f"checking {which} of {machine} (CUDA_VISIBLE_DEVICES)"


def render_text(check: BoxCheck) -> str:
    items = check.items
    w_scope = max((len(i.scope) for i in items), default=5)
    w_name = max((len(i.name) for i in items), default=4)
    w_meas = min(60, max((len(i.measured) for i in items), default=8))
    scope = checked_gpus_line(check.facts)
    lines = [scope] if scope else []
    lines += [f"{'':4}  {'where':<{w_scope}}  {'check':<{w_name}}  {'measured':<{w_meas}}  expected"]
    for i in items:
        lines.append(f"{MARK.get(i.status, i.status):4}  {i.scope:<{w_scope}}  {i.name:<{w_name}}  "
                     f"{i.measured or '-':<{w_meas}}  {i.expected or '-'}")
        if i.note and i.status != "ok":
            lines.append(f"{'':4}  {'':<{w_scope}}  {'':<{w_name}}  -> {i.note}")
    lines.append("")
    lines.append(f"{check.summary}  ({check.duration_s:.1f} s)")
    return "\n".join(lines)


def to_json(check: BoxCheck) -> str:
    data: dict[str, Any] = check.to_dict()
    data.pop("v", None)
    return json.dumps(data, indent=2, allow_nan=False, default=str)
