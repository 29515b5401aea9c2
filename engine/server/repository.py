"""Prepare a model repository for one run: one model, one config variant, in a fresh folder.

Variants are files beside each model (the same layout the seeds used for NVIDIA's container):
``config.pbtxt`` (1x GPU, or the only config of a CPU model), ``config.multigpu.Nx.pbtxt``
(instance groups over N GPUs), ``config.cpu.pbtxt`` and ``config.cpuK.pbtxt`` (a CPU variant with
K instances, variant "cpuK": the CPU study's second config). The chosen one becomes the prepared
copy's ``config.pbtxt``; nothing in the source repository is ever modified. The models a model
needs come with it: an ensemble's steps, and those a BLS model names in its "calls" parameter.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from engine.errors import UserError
from engine.suggest import did_you_mean

REPOSITORY_ROOT = Path(__file__).resolve().parents[2] / "model_repository"
EMBEDDED_ROOT = REPOSITORY_ROOT / "embedded"
VIT_SOURCE = REPOSITORY_ROOT / "vit.py"
VIT_MODEL_SOURCE = EMBEDDED_ROOT / "vit_model.py"
VIT_BATCHING_SOURCE = EMBEDDED_ROOT / "vit_batching.py"
EXECUTE_CLOCK_SOURCE = EMBEDDED_ROOT / "execute_clock.py"
_MULTIGPU = re.compile(r"^config\.multigpu\.(\d+)x\.pbtxt$")
_CPU_INSTANCES = re.compile(r"^config\.cpu(\d+)\.pbtxt$")  # "cpu2": a CPU variant with 2 instances
ENSEMBLE = re.compile(r'^\s*platform\s*:\s*"ensemble"', re.M)


@dataclass(frozen=True)
class PreparedModel:
    repository: Path  # pass to tritonserver --model-repository
    model: str
    variant: str  # "cpu", "1x", "2x", ...
    config_text: str
    gpus: tuple[int, ...]  # GPU indices the instance groups use


def embedded_models() -> list[str]:
    return sorted(p.name for p in EMBEDDED_ROOT.iterdir() if (p / "config.pbtxt").is_file())


def variant_files(model_dir: Path) -> dict[str, Path]:
    """Variant name -> config file, for one model folder."""
    files: dict[str, Path] = {}
    base = model_dir / "config.pbtxt"
    if base.is_file():
        files["1x" if "KIND_GPU" in base.read_text() else "cpu"] = base
    if (model_dir / "config.cpu.pbtxt").is_file():
        files["cpu"] = model_dir / "config.cpu.pbtxt"
    for path in model_dir.iterdir():
        if match := _MULTIGPU.match(path.name):
            files[f"{match.group(1)}x"] = path
        elif match := _CPU_INSTANCES.match(path.name):
            files[f"cpu{match.group(1)}"] = path
    return files


def choose_variant(requested: str, available: dict[str, Path], gpu_count: int, model: str) -> str:
    """Resolve "auto" and check that the variant exists and fits the GPUs present."""
    gpu_variants = sorted((int(v[:-1]) for v in available if v.endswith("x")), reverse=True)
    if requested == "auto":
        fitting = [n for n in gpu_variants if n <= gpu_count]
        if fitting:
            return f"{fitting[0]}x"
        if "cpu" in available:
            return "cpu"
        raise UserError(f"model {model!r} has no CPU variant and this machine has no GPU")
    if requested not in available:
        names = ", ".join(sorted(available))
        raise UserError(f"model {model!r} has no {requested} variant (available: {names})")
    if requested.endswith("x") and int(requested[:-1]) > gpu_count:
        raise UserError(f"variant {requested} needs {requested[:-1]} GPUs; this machine has {gpu_count}")
    return requested


def chosen_config(model: str, variant: str, gpu_count: int) -> str | None:
    """The config.pbtxt text an embedded server would run for ``variant`` ("auto" resolved as
    the server resolves it); None where it could not start (the server's start says why)."""
    source = EMBEDDED_ROOT / model
    if not (source / "config.pbtxt").is_file():
        return None
    files = variant_files(source)
    try:
        return files[choose_variant(variant, files, gpu_count, model)].read_text()
    except (UserError, OSError):
        return None


def on_gpus(config_text: str) -> bool:
    """The config's instance groups run on GPUs (its comments left out)."""
    return "KIND_GPU" in re.sub(r"#.*", "", config_text)


def decoupled(config_text: str) -> bool:
    """The config streams its responses (model_transaction_policy { decoupled: true })."""
    return re.search(r"\bdecoupled\s*:\s*true\b", re.sub(r"#.*", "", config_text)) is not None


def companions(config_text: str) -> list[str]:
    """The models a model needs beside it in the repository: an ensemble's steps, and those a
    BLS model calls (its "calls" parameter, comma-separated)."""
    steps = re.findall(r'model_name\s*:\s*"([^"]+)"', config_text) if ENSEMBLE.search(config_text) else []
    calls = [name.strip() for name in (parameter(config_text, "calls") or "").split(",") if name.strip()]
    return list(dict.fromkeys(steps + calls))


def instance_gpus(config_text: str) -> tuple[int, ...]:
    found: set[int] = set()
    for group in re.findall(r"gpus\s*:\s*\[([^\]]*)\]", config_text):
        found.update(int(x) for x in group.replace(",", " ").split())
    return tuple(sorted(found))


def parameter(config_text: str, key: str) -> str | None:
    """A model parameter's string value, or None."""
    found = re.search(r'parameters\s*\{\s*key:\s*"' + re.escape(key) + r'"\s*value:\s*\{\s*string_value:\s*"([^"]*)"',
                      config_text)
    return found.group(1) if found else None


def instance_count(config_text: str) -> int | None:
    """The count of the config's (first) instance group."""
    found = re.search(r"instance_group\s*\[\s*\{[^}]*?count\s*:\s*(\d+)", config_text)
    return int(found.group(1)) if found else None


def set_instance_count(prepared: PreparedModel, count: int) -> PreparedModel:
    """The prepared model with every instance group's count set to ``count`` (its config.pbtxt
    rewritten; the server has not read it yet)."""
    text = re.sub(r"(instance_group\s*\[\s*\{[^}]*?count\s*:\s*)\d+", lambda m: m.group(1) + str(count),
                  prepared.config_text)
    (prepared.repository / prepared.model / "config.pbtxt").write_text(text)
    return replace(prepared, config_text=text)


def _set_parameter(config_text: str, key: str, value: str) -> str:
    line = f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}'
    pattern = re.compile(r'parameters\s*\{\s*key:\s*"' + re.escape(key) + r'".*?\}\s*\}', re.S)
    if pattern.search(config_text):
        return pattern.sub(line, config_text)
    return config_text.rstrip() + "\n" + line + "\n"


def prepare_repository(
    model: str, variant: str, dest: Path, *, gpu_count: int = 0, weights: str | None = None
) -> PreparedModel:
    """Copy one embedded model into ``dest`` with the chosen variant as its config.pbtxt."""
    source = EMBEDDED_ROOT / model
    if not (source / "config.pbtxt").is_file():
        names = embedded_models()
        raise UserError(f"unknown embedded model {model!r}{did_you_mean(model, names)} (available: {', '.join(names)})")
    if weights and not Path(weights).is_file():
        raise UserError(f"model.weights: no such file {weights!r}")
    files = variant_files(source)
    chosen = choose_variant(variant, files, gpu_count, model)
    config_text = files[chosen].read_text()
    if weights:
        config_text = _set_parameter(config_text, "weights", str(Path(weights).resolve()))

    target = dest / model
    version_dir = target / "1"
    version_dir.mkdir(parents=True, exist_ok=False)
    (target / "config.pbtxt").write_text(config_text)
    own_code = source / "1" / "model.py"
    if own_code.is_file():
        shutil.copy2(own_code, version_dir / "model.py")  # a link (a shared model.py) is copied as a file
    elif ENSEMBLE.search(config_text):
        pass  # the server runs its steps: no code, an empty version folder
    else:  # the ViT models share one implementation
        shutil.copy2(VIT_MODEL_SOURCE, version_dir / "model.py")
        shutil.copy2(VIT_SOURCE, version_dir / "vit.py")
        shutil.copy2(VIT_BATCHING_SOURCE, version_dir / "vit_batching.py")
        shutil.copy2(EXECUTE_CLOCK_SOURCE, version_dir / "execute_clock.py")
    for called in companions(config_text):  # an ensemble's steps, a BLS model's callees
        if not (dest / called).exists():
            prepare_repository(called, "auto", dest, gpu_count=gpu_count)
    return PreparedModel(dest, model, chosen, config_text, instance_gpus(config_text))
