"""Which variants a study runs, checked before anything starts (bad input: one line, exit 2)."""

from __future__ import annotations

import re
from pathlib import Path

from engine.errors import UserError
from engine.profiles import scale_out_parts
from engine.server.repository import EMBEDDED_ROOT, embedded_models, variant_files

_NAME = re.compile(r"^(\d+x|cpu\d*|1x\*[1-9]\d*|cpu\d*\*[1-9]\d*|tp[1-9]\d*|1\*[1-9]\d*)$")  # tp, 1*N: --serve


def variant_units(variant: str) -> int:
    """GPUs of an "Nx" variant; CPU instances of "cpu" (1) or "cpuK" (K); a scale-out variant's
    units are its servers' together ("1x*4": 4 GPUs, "cpu2*2": 4 CPU instances)."""
    parts = scale_out_parts(variant)
    if parts is not None:
        return variant_units(parts[0]) * parts[1]
    if variant.endswith("x"):
        return int(variant[:-1])
    if variant.startswith("tp"):  # a served LLM's tensor-parallel size: its GPUs
        return int(variant[2:])
    return int(variant[3:] or 1)


def is_gpu_variant(variant: str) -> bool:
    """Its units are GPUs ("4x", "1x*4", a served LLM's "tp2" and "1*2"), not CPU instances."""
    return not variant.startswith("cpu")


def variant_order(variant: str) -> tuple[int, int, int]:
    """CPU variants before GPU ones, then by size; a scale-out variant after the scale-up
    variants of its kind (it answers a question about them)."""
    return (0 if variant.startswith("cpu") else 1, 1 if scale_out_parts(variant) else 0, variant_units(variant))


def scale_out_variant(planned: list[str], gpu_count: int) -> str:
    """The variant `study --scale-out` adds: ``1x*N`` with N the largest scale-up variant's GPUs
    (at least 2: one server is the 1x variant itself), or ``cpu*2`` on a CPU study. On a box
    with fewer GPUs than N, the servers share them (engine/server/fleet.py says so)."""
    gpu = [variant_units(v) for v in planned if is_gpu_variant(v) and not scale_out_parts(v)]
    if gpu_count > 0 and gpu:
        return f"1x*{max(2, *gpu)}"
    return "cpu*2"


def parse_variants(text: str | None) -> list[str] | None:
    """"1x,2x,4x" -> ["1x", "2x", "4x"]; None -> None (every variant that fits)."""
    if text is None:
        return None
    names = [v.strip().lower() for v in text.split(",") if v.strip()]
    if not names:
        raise UserError("--variants: expected a comma-separated list such as 1x,2x,4x")
    for name in names:
        if not _NAME.match(name):
            raise UserError(f"--variants: unknown variant {name!r} (expected Nx for N GPUs, cpu or cpuK; "
                            "1x*N or cpu*N for N servers; with --serve tpN or 1*N)")
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


def refuse_scale_out_remote(variants: list[str] | None) -> None:
    """Scale-out variants start embedded servers: a study of a remote server cannot run them."""
    for name in variants or []:
        if scale_out_parts(name):
            raise UserError(f"variant {name}: scale-out variants start embedded servers; for several remote "
                            "servers, list them in server.urls")


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
        parts = scale_out_parts(name)
        if parts is not None:
            _check_scale_out(model, name, parts, files, gpu_count, gpus_known)
            continue
        if name not in files:
            raise UserError(f"model {model!r} has no {name} variant (available: "
                            f"{', '.join(sorted(files, key=variant_order))})")
        if gpus_known and name.endswith("x") and variant_units(name) > gpu_count:
            n = variant_units(name)
            raise UserError(f"variant {name} needs {n} GPU{'s' if n != 1 else ''}; this machine has {gpu_count}")
    return sorted(requested, key=variant_order)


def _check_scale_out(model: str, name: str, parts: tuple[str, int], files: dict[str, Path], gpu_count: int,
                     gpus_known: bool) -> None:
    """``1x*N`` needs the model's 1x config and N GPUs, as ``Nx`` does (one per server); ``cpu*N``
    the cpu config."""
    base, servers = parts
    if base not in files:
        raise UserError(f"variant {name}: model {model!r} has no {base} variant (available: "
                        f"{', '.join(sorted(files, key=variant_order))})")
    if gpus_known and base == "1x" and servers > gpu_count:
        raise UserError(f"variant {name} needs {servers} GPUs (one per server); this machine has {gpu_count}")
