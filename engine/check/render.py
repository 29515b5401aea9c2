"""The check as plain text for people (fixed columns, no colours: it goes to logs and to
boxes without the TUI stack) and as JSON for scripts."""

from __future__ import annotations

import json
import textwrap
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


# shorter words for a narrow terminal: the JSON and a wide terminal keep the full ones
SHORT_NAMES = {"device-to-device bandwidth": "GPU-GPU copies", "host-to-device bandwidth": "host-GPU copies",
               "ecc / retired pages": "ecc", "clock throttling": "throttling", "all-reduce busbw": "all-reduce"}


def _short_scope(scope: str) -> str:
    return "profile" if scope.startswith("profile ") else scope


def render_text(check: BoxCheck, width: int | None = None) -> str:
    """The table and the go/no-go paragraph; ``width``: the terminal's (None: a log, no limit).
    Where the wide table does not fit, each row keeps its mark, where, check and measured, and
    the expected figure and the note go under it, wrapped."""
    items = check.items
    w_scope = max((len(i.scope) for i in items), default=5)
    w_name = max((len(i.name) for i in items), default=4)
    w_meas = min(60, max((len(i.measured) for i in items), default=8))
    w_exp = max((len(i.expected) for i in items), default=8)
    scope = checked_gpus_line(check.facts)
    lines = [scope] if scope else []
    if width is None or 4 + 2 + w_scope + 2 + w_name + 2 + w_meas + 2 + w_exp <= width:
        lines += _wide(check, w_scope, w_name, w_meas)
    else:
        lines += _narrow(check, width)
    lines.append("")
    summary = f"{check.summary}  ({check.duration_s:.1f} s)"
    lines += textwrap.wrap(summary, width, break_on_hyphens=False) if width else [summary]
    return "\n".join(lines)


def _wide(check: BoxCheck, w_scope: int, w_name: int, w_meas: int) -> list[str]:
    lines = [f"{'':4}  {'where':<{w_scope}}  {'check':<{w_name}}  {'measured':<{w_meas}}  expected"]
    for i in check.items:
        lines.append(f"{MARK.get(i.status, i.status):4}  {i.scope:<{w_scope}}  {i.name:<{w_name}}  "
                     f"{i.measured or '-':<{w_meas}}  {i.expected or '-'}")
        if i.note and i.status != "ok":
            lines.append(f"{'':4}  {'':<{w_scope}}  {'':<{w_name}}  -> {i.note}")
    return lines


def _narrow(check: BoxCheck, width: int) -> list[str]:
    items = check.items
    w_scope = max((len(_short_scope(i.scope)) for i in items), default=5)
    w_name = max((len(SHORT_NAMES.get(i.name, i.name)) for i in items), default=4)
    lead = 4 + 2 + w_scope + 2 + w_name + 2
    room = max(width - lead, 20)
    pad = " " * lead
    profile = next((i.scope for i in items if i.scope.startswith("profile ")), None)
    lines = [f"the profile rows compare the box with {profile}"] if profile else []
    lines.append(f"{'':4}  {'where':<{w_scope}}  {'check':<{w_name}}  measured (expected, under a row not ok)")
    for i in items:
        measured = textwrap.wrap(i.measured or "-", room, break_on_hyphens=False) or ["-"]
        lines.append(f"{MARK.get(i.status, i.status):4}  {_short_scope(i.scope):<{w_scope}}  "
                     f"{SHORT_NAMES.get(i.name, i.name):<{w_name}}  {measured[0]}")
        lines += [pad + part for part in measured[1:]]
        if i.status == "ok":
            continue
        if i.expected:
            lines += textwrap.wrap(f"expected {i.expected}", width, initial_indent=pad, subsequent_indent=pad + "  ",
                                   break_on_hyphens=False)
        if i.note:
            lines += textwrap.wrap(f"-> {i.note}", width, initial_indent=pad, subsequent_indent=pad + "   ",
                                   break_on_hyphens=False)
    return lines


def to_json(check: BoxCheck) -> str:
    data: dict[str, Any] = check.to_dict()
    data.pop("v", None)
    return json.dumps(data, indent=2, allow_nan=False, default=str)
