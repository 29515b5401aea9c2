"""Where the tritonserver binary from the nvidia-pytriton wheel lives, and how to run it.

The wheel ships tritonserver, its libraries (nvidia_pytriton.libs/) and one Python-backend stub
per Python version. The stub must match the Python that runs the models (this interpreter), so
a backend folder is assembled per run: the wheel's backend library plus the matching stub.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from engine.errors import UserError


@dataclass(frozen=True)
class TritonDistribution:
    root: Path  # .../pytriton/tritonserver
    libs: Path  # .../nvidia_pytriton.libs

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tritonserver"

    def stub(self) -> Path:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        return self.root / "python_backend_stubs" / version / "triton_python_backend_stub"


def find_distribution() -> TritonDistribution:
    # Linux only (nvidia-pytriton ships Linux builds): the guard, the MPS handling and the
    # Python backend's regions use /proc, prctl and /dev/shm. Elsewhere: a remote server.
    if sys.platform != "linux":
        raise UserError(f"the embedded server runs on Linux only (this is {sys.platform}): use a remote server (server.kind = \"remote\")")
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the embedded server needs nvidia-pytriton: pip install 'gpuscale-tui[server]'")
    package = Path(next(iter(spec.submodule_search_locations)))
    dist = TritonDistribution(package / "tritonserver", package.parent / "nvidia_pytriton.libs")
    if not dist.binary.is_file():
        raise UserError(f"nvidia-pytriton is installed but has no tritonserver binary at {dist.binary}")
    if not dist.stub().is_file():
        raise UserError(f"nvidia-pytriton has no Python-backend stub for Python {sys.version_info[:2]}")
    refusal = numpy_refusal(stub_numpy_version())
    if refusal:
        raise UserError(refusal)
    return dist


@functools.lru_cache(maxsize=1)
def stub_numpy_version() -> str | None:
    """The numpy the Python-backend stub will import. The stub ignores PYTHONPATH: it sees this
    interpreter's standard library and site-packages (a venv's first), as ``python -I`` does."""
    probe = "import importlib.metadata as m; print(m.version('numpy'))"
    try:
        done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    version = done.stdout.strip()
    return version if done.returncode == 0 and version else None


def numpy_refusal(version: str | None) -> str | None:
    """nvidia-pytriton 0.7's Python backend (Triton 2.51) answers every request with empty
    outputs (binary_data_size 0) when its stub runs numpy 2: refuse before any load is sent.
    docs/results/empty_answers_on_the_gpu_boxes.md has how it was found."""
    if version is None or not version.split(".")[0].isdigit() or int(version.split(".")[0]) < 2:
        return None
    return (f"the embedded server's Python backend answers with empty outputs under numpy {version}: install "
            "numpy<2 where this tool runs (pip install 'numpy<2', as the [server] extra pins it) or use a remote server")


def assemble_backends(dist: TritonDistribution, dest: Path) -> Path:
    """A backend folder with the wheel's Python backend and the stub for this Python."""
    python_dir = dest / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    source = dist.root / "backends" / "python"
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        target = python_dir / name
        if not target.exists():
            os.symlink(source / name, target)
    shutil.copy2(dist.stub(), python_dir / "triton_python_backend_stub")
    return dest


def server_environment(dist: TritonDistribution, extra_pythonpath: list[str]) -> dict[str, str]:
    """Environment for tritonserver and the stubs it starts.

    The stub embeds libpython: put this interpreter's libpython first so the models run on the
    same Python (and see the same packages: torch, numpy) as this tool.
    """
    env = dict(os.environ)
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    lib_paths = [str(dist.libs), libdir, env.get("LD_LIBRARY_PATH", "")]
    env["LD_LIBRARY_PATH"] = ":".join(p for p in lib_paths if p)
    site_paths = [p for p in sys.path if p and Path(p).is_dir()]
    env["PYTHONPATH"] = ":".join([*extra_pythonpath, *site_paths])
    env["PYTHONHOME"] = sys.base_prefix
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    # NVLink multicast stays off on shared GPU hosts (and does not help this workload)
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    env.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    return env
