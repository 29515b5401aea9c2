"""`python -m bench carry`: pack what a GPU box without network needs (.carry/, .wheels/perf_analyzer)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import CARRY, CARRY_NUMPY, CORE_WHEELS, GRPC_WHEELS
from bench.tools import SetupError, ensure_perf_analyzer


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    """The `carry` stage."""
    p = argparse.ArgumentParser(
        prog=prog, description="Pack what a GPU box without network needs: the tritonserver of this checkout's "
        "nvidia-pytriton with the Python-backend stub for the box's Python (.carry/triton.tar.xz, ~27 MB), "
        "perf_analyzer 2.41 with its libraries (.wheels/perf_analyzer/) and, with --textual, textual's wheels "
        "(.carry/wheels/). All git-ignored; pass .carry and .wheels/perf_analyzer as the device run's carry.",
        epilog="Fits: here, before a device run; about a minute (xz), more on the first perf_analyzer set-up.")
    p.add_argument("--stub-python", default="3.12", help="the device's Python version (default 3.12)")
    p.add_argument("--textual", action="store_true", help="also download textual's wheels (for tui_overhead there)")
    p.add_argument("--grpc", action="store_true", help="also download the grpc transport's wheels (tritonclient 2.41,"
                   " grpcio, protobuf) for the box's Python; installed there by every stage when grpc is missing")
    p.add_argument("--no-perf-analyzer", action="store_true", help="skip perf_analyzer")
    return p


def drop_bundled_binaries(wheel: Path) -> None:
    """Rewrite tritonclient's wheel without the perf_analyzer and perf_client binaries it bundles
    (12 MB of the carry's 64 MiB; .wheels/perf_analyzer brings perf_analyzer with its libraries).
    Their RECORD lines go too: pip installs the rest as it is."""
    import zipfile

    with zipfile.ZipFile(wheel) as src:
        names = [i for i in src.infolist() if "/bin/" not in i.filename]
        if len(names) == len(src.infolist()):
            return
        tmp = wheel.with_suffix(".tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for info in names:
                data = src.read(info)
                if info.filename.endswith(".dist-info/RECORD"):
                    data = b"".join(line for line in data.splitlines(keepends=True) if b"/bin/" not in line)
                out.writestr(info, data)
    tmp.replace(wheel)


def pack_numpy1(python_version: str) -> int:
    """.carry/numpy.tar.xz: numpy 1.26 for the box's Python, unpacked (xz: ~8 MiB, the wheel 18)."""
    with tempfile.TemporaryDirectory() as tmp:
        code = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps",
                               "--python-version", python_version, "--platform", "manylinux2014_x86_64",
                               "-d", tmp, "numpy==1.26.4"]).returncode
        wheels = list(Path(tmp).glob("numpy-*.whl"))
        if code or not wheels:
            print("carry: pip download numpy==1.26.4 failed", file=sys.stderr)
            return 1
        tree = Path(tmp) / "numpy1"
        shutil.unpack_archive(wheels[0], tree, "zip")
        for tests in tree.rglob("tests"):
            shutil.rmtree(tests, ignore_errors=True)
        subprocess.run(["tar", "-C", tmp, "-cJf", str(CARRY_NUMPY), "numpy1"], check=True)
    print(f"{CARRY_NUMPY}: {CARRY_NUMPY.stat().st_size / 2**20:.1f} MiB")
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        import pytriton
    except ImportError:
        print("carry: this checkout has no nvidia-pytriton (.venv: scripts/setup.sh)", file=sys.stderr)
        return 2
    site = Path(pytriton.__file__).resolve().parent.parent
    triton = site / "pytriton" / "tritonserver"
    stub = triton / "python_backend_stubs" / args.stub_python
    if not stub.is_dir():
        print(f"carry: nvidia-pytriton has no Python-backend stub for Python {args.stub_python}", file=sys.stderr)
        return 2
    CARRY.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "site"
        for part in ("bin", "backends", "caches"):
            shutil.copytree(triton / part, dest / "pytriton" / "tritonserver" / part, symlinks=True)
        shutil.copytree(stub, dest / "pytriton" / "tritonserver" / "python_backend_stubs" / args.stub_python, symlinks=True)
        shutil.rmtree(dest / "pytriton" / "tritonserver" / "backends" / "python" / "__pycache__", ignore_errors=True)
        (dest / "pytriton" / "__init__.py").touch()  # only the data is needed: find_spec must see a package
        shutil.copytree(site / "nvidia_pytriton.libs", dest / "nvidia_pytriton.libs", symlinks=True)
        for lib in (dest / "nvidia_pytriton.libs").glob("libpython3-*"):
            lib.unlink()  # used by nothing the stages run
        subprocess.run(["tar", "-C", tmp, "-cJf", str(CARRY / "triton.tar.xz"), "site"], check=True)
    print(f"{CARRY / 'triton.tar.xz'}: {(CARRY / 'triton.tar.xz').stat().st_size / 2**20:.1f} MiB")
    if not CARRY_NUMPY.exists() and pack_numpy1(args.stub_python):
        return 1
    if args.textual:  # the version tested here, with its dependencies (unpacked there where missing)
        from importlib.metadata import version

        code = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                               "--python-version", args.stub_python, "-d", str(CARRY / "wheels"),
                               f"textual=={version('textual')}"]).returncode
        if code:
            print("carry: pip download textual failed", file=sys.stderr)
            return 1
        print(f"{CARRY / 'wheels'}: {len(list((CARRY / 'wheels').glob('*.whl')))} wheels")
    wanted = [*CORE_WHEELS, *(GRPC_WHEELS if args.grpc else ())]
    code = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps",
                           "--python-version", args.stub_python, "--platform", "manylinux2014_x86_64",
                           "-d", str(CARRY / "wheels"), *wanted]).returncode
    if code:
        print(f"carry: pip download of {', '.join(wanted)} failed", file=sys.stderr)
        return 1
    for wheel in (CARRY / "wheels").glob("tritonclient-*.whl"):
        drop_bundled_binaries(wheel)
    if not args.no_perf_analyzer:
        try:
            binary, _ = ensure_perf_analyzer()
        except SetupError as exc:
            print(f"carry: {exc}", file=sys.stderr)
            return 1
        if shutil.which("strip"):  # its symbols are a quarter of the carry's room (64 MiB)
            subprocess.run(["strip", str(binary)], check=False)
        print(f"{binary.parent}: perf_analyzer and its libraries")
    return 0
