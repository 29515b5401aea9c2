"""The LLM serving study's configs (``study --serve``), checked before anything starts: ``tpN``
(one server, tensor parallel over N GPUs) and ``1*N`` (N one-GPU replicas, our load spread over
them, as the Triton study's ``1x*N``). By default, for N units: tp1, tpN and 1*N, so the study
answers scale up (TP=N) or out (N replicas) and where to stop."""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.errors import UserError
from engine.study.variants import variant_order, variant_units

_NAME = re.compile(r"^(tp[1-9]\d*|1\*[1-9]\d*)$")


@dataclass(frozen=True)
class Serve:
    """--serve: the command's words (engine/server/serve_command.py's check_template), the text
    as given, how long each server may take to come up, and N (--gpus; None: the box's)."""

    words: list[str]
    template: str
    start_budget_s: float
    units: int | None = None


def serve_configs(requested: list[str] | None, gpus: int, units: int | None) -> list[str]:
    """The configs to run, smallest first. ``requested``: --variants (tp1,tp2,1*2); None: tp1, tpN
    and 1*N with N = ``units`` (--gpus), else the GPUs present (2 on a box without GPUs, where
    {tp} is the server's own reading of it, e.g. llama-server's threads). A config needing more
    GPUs than the box has is bad input."""
    if requested is None:
        n = units if units is not None else max(2, gpus)
        if n < 2:
            raise UserError(f"--gpus: the study weighs 1 GPU against N; expected N >= 2, found {n}")
        return sorted({"tp1", f"tp{n}", f"1*{n}"}, key=variant_order)
    for name in requested:
        if not _NAME.match(name):
            raise UserError(f"--variants: {name!r} is not a serving config (expected tpN for one server over N GPUs "
                            "or 1*N for N one-GPU replicas)")
        if gpus > 0 and variant_units(name) > gpus:
            raise UserError(f"config {name} needs {variant_units(name)} GPUs; this machine has {gpus}")
    return sorted(requested, key=variant_order)


def where_it_runs(gpus: int) -> str:
    """What {gpus} and {tp} mean on this box, said once at the start."""
    if gpus > 0:
        return f"{gpus} GPU(s): each server pinned to its GPUs (CUDA_VISIBLE_DEVICES={{gpus}})"
    return "no GPUs on this box: {gpus} is empty (CUDA_VISIBLE_DEVICES=\"\"), {tp} is the config's size"

