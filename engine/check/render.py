"""The check as plain text for people (fixed columns, no colours: it goes to logs and to
boxes without the TUI stack) and as JSON for scripts."""

from __future__ import annotations

import json
from typing import Any

from engine.events import BoxCheck

MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "n/a": "n/a "}


def render_text(check: BoxCheck) -> str:
    items = check.items
    w_scope = max((len(i.scope) for i in items), default=5)
    w_name = max((len(i.name) for i in items), default=4)
    w_meas = min(60, max((len(i.measured) for i in items), default=8))
    lines = [f"{'':4}  {'where':<{w_scope}}  {'check':<{w_name}}  {'measured':<{w_meas}}  expected"]
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
