"""Which variants a study runs, checked before anything starts (bad input: one line, exit 2)."""

from __future__ import annotations

import re
from pathlib import Path

from engine.errors import UserError
from engine.server.repository import EMBEDDED_ROOT, embedded_models, variant_files

_NAME = re.compile(r"^(\d+x|cpu\d*)$")


def variant_units(variant: str) -> int:
    """GPUs of an "Nx" variant; CPU instances of "cpu" (1) or "cpuK" (K)."""
    if variant.endswith("x"):
        return int(variant[:-1])
    return int(variant[3:] or 1)


def variant_order(variant: str) -> tuple[int, int]:
    """CPU variants before GPU ones, then by size."""
    return (0 if variant.startswith("cpu") else 1, variant_units(variant))


def parse_variants(text: str | None) -> list[str] | None:
    """"1x,2x,4x" -> ["1x", "2x", "4x"]; None -> None (every variant that fits)."""
    if text is None:
        return None
    names = [v.strip().lower() for v in text.split(",") if v.strip()]
    if not names:
        raise UserError("--variants: expected a comma-separated list such as 1x,2x,4x")
    for name in names:
        if not _NAME.match(name):
            raise UserError(f"--variants: unknown variant {name!r} (expected Nx for N GPUs, cpu or cpuK)")
    if len(set(names)) != len(names):
        raise UserError(f"--variants: a variant is listed twice in {text!r}")
    return names


def available_variants(model: str, sources: dict[str, Path] | None = None) -> dict[str, Path]:
    if sources is not None:
        return sources
    folder = EMBEDDED_ROOT / model
    if not (folder / "config.pbtxt").is_file():
        raise UserError(f"unknown embedded model {model!r} (available: {', '.join(embedded_models())})")
    return variant_files(folder)


def plan_variants(model: str, requested: list[str] | None, gpu_count: int,
                  sources: dict[str, Path] | None = None, gpus_known: bool = True) -> list[str]:
    """The variants to run, smallest first. ``requested`` None: every GPU variant that fits the
    GPUs present, or on a machine without GPUs every CPU variant. Unknown variants and variants
    needing more GPUs than present are bad input."""
    files = available_variants(model, sources)
    if requested is None:
        gpu = [v for v in files if v.endswith("x") and variant_units(v) <= gpu_count]
        chosen = gpu if gpu_count > 0 and gpu else [v for v in files if v.startswith("cpu")]
        if not chosen:
            raise UserError(f"model {model!r} has no variant that runs here ({gpu_count} GPUs; "
                            f"variants: {', '.join(sorted(files, key=variant_order))})")
        return sorted(chosen, key=variant_order)
    for name in requested:
        if name not in files:
            raise UserError(f"model {model!r} has no {name} variant (available: "
                            f"{', '.join(sorted(files, key=variant_order))})")
        if gpus_known and name.endswith("x") and variant_units(name) > gpu_count:
            n = variant_units(name)
            raise UserError(f"variant {name} needs {n} GPU{'s' if n != 1 else ''}; this machine has {gpu_count}")
    return sorted(requested, key=variant_order)
