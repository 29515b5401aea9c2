"""What the stages share that is not a load tool: where output goes, the GPU box's environment
and what to carry there (the `carry` stage), GPU busy % from NVML, and Triton's model statistics.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Self

ROOT = Path(__file__).resolve().parent.parent
CARRY = ROOT / ".carry"
CARRY_SITE = Path(tempfile.gettempdir()) / "gpuscale-carry" / "site"
CARRY_NUMPY = CARRY / "numpy.tar.xz"  # numpy<2 for the box's Python: the Python-backend stub needs it
NUMPY_VENV = Path(tempfile.gettempdir()) / "gpuscale-carry" / "numpy1-venv"


def out_dir() -> Path:
    """$OUT when set (a device run brings it back), else .bench-out/ (git-ignored); created."""
    path = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / ".bench-out"
    path.mkdir(parents=True, exist_ok=True)
    return path


def stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


class CpuAwake:
    """Holds /dev/cpu_dma_latency at 0 µs while open (Linux, root), as tuned's latency-performance
    profile does: an idle CPU polls instead of halting. In a VM a halt is an exit to the host, whose
    wake-up time varies with the host's load; a sub-ms round trip at concurrency 1 pays it on
    every hop, in both tools. Released when closed (or when the process ends)."""

    PATH = "/dev/cpu_dma_latency"

    def __init__(self) -> None:
        self._fd: int | None = None

    def __enter__(self) -> CpuAwake:
        try:
            self._fd = os.open(self.PATH, os.O_WRONLY)
            os.write(self._fd, (0).to_bytes(4, sys.byteorder))
        except OSError as exc:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            raise OSError(f"cannot hold {self.PATH} at 0: {exc.strerror} (it needs Linux and root)") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# --------------------------------------------------------------------------- the GPU box


CORE_WHEELS = ("psutil", "msgspec", "prometheus-client")  # core dependencies a box's Python may lack: always carried
GRPC_WHEELS = ("tritonclient==2.41.0", "grpcio", "protobuf<7", "typing_extensions")  # the grpc transport's, carried with --grpc (2.41.0: tested with protobuf 6)


def reexec_with_numpy1() -> None:
    """On a box whose Python has numpy 2 (the embedded server refuses it: its stub answers empty
    outputs), re-run this command under a venv that sees the box's packages with the carried
    numpy<2 in front. The stub ignores PYTHONPATH, so a venv is the way to put it first."""
    if os.environ.get("GPUSCALE_NUMPY1_VENV") or not CARRY_NUMPY.exists():
        return
    from engine.server.distribution import numpy_refusal, stub_numpy_version

    if numpy_refusal(stub_numpy_version()) is None:
        return
    python = NUMPY_VENV / "bin" / "python3"
    site = NUMPY_VENV / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    if not (site / "numpy").is_dir():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(NUMPY_VENV)], check=True)
        subprocess.run(["tar", "-C", str(site), "--strip-components=1", "-xJf", str(CARRY_NUMPY)], check=True)
        # every package folder this Python sees (torch, psutil...), after the venv's own numpy:
        # a .pth file, which the stub's interpreter reads too (a venv's system-site-packages
        # misses some of a distribution's folders)
        folders = [p for p in sys.path if p and Path(p).is_dir() and Path(p).name in ("site-packages", "dist-packages")]
        (site / "box-packages.pth").write_text("".join(f"{p}\n" for p in folders))
    print(f"[carry] numpy 2 on this box: re-running under {python} (numpy<2 first)", flush=True)
    os.environ["GPUSCALE_NUMPY1_VENV"] = "1"
    os.execv(python, [str(python), *sys.orig_argv[1:]])


CARRIED_MODULES = {"grpcio": "grpc", "tritonclient": "tritonclient", "protobuf": "google.protobuf", "psutil": "psutil",
                   "typing_extensions": "typing_extensions", "msgspec": "msgspec", "prometheus_client": "prometheus_client"}
# textual and the versions of its dependencies it was downloaded with (carry --textual): pure-Python
# wheels, unpacked together ahead of the box's own (its rich may be older than textual needs)
TEXTUAL_WHEELS = ("textual", "rich", "pygments", "markdown_it_py", "mdurl", "mdit_py_plugins", "linkify_it_py",
                  "uc_micro_py", "platformdirs")
CARRY_TEXTUAL = Path(tempfile.gettempdir()) / "gpuscale-carry" / "textual-site"


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package missing
        return False


def unpack_missing_wheels(wheels: Path) -> bool:
    """Unpack into CARRY_SITE each carried wheel whose module the box lacks (psutil, the grpc
    transport's, textual's). A wheel is a zip: no pip needed (the numpy1 venv has none)."""
    unpacked = False
    for wheel in sorted(wheels.glob("*.whl")):
        module = CARRIED_MODULES.get(wheel.name.split("-")[0])
        if module and not _importable(module):
            shutil.unpack_archive(wheel, CARRY_SITE, "zip")
            for lib in CARRY_SITE.glob("*.data/*lib"):  # purelib/platlib: what pip moves to the top
                shutil.copytree(lib, CARRY_SITE, dirs_exist_ok=True)
            unpacked = True
    return unpacked


def unpack_textual(wheels: Path) -> bool:
    """On a box without textual, its carried wheels into CARRY_TEXTUAL; True when that folder
    is to go ahead of the box's packages."""
    if _importable("textual") or not any(wheels.glob("textual-*.whl")):
        return False
    if not (CARRY_TEXTUAL / "textual").is_dir():
        for wheel in sorted(wheels.glob("*.whl")):
            if wheel.name.split("-")[0].lower() in TEXTUAL_WHEELS:
                shutil.unpack_archive(wheel, CARRY_TEXTUAL, "zip")
    return True


def device_environment(numpy1: bool = True) -> None:
    """Set up before every stage. NVLink multicast off (the lent multi-GPU boxes need it off), the
    repository on PYTHONPATH for the subprocesses (servers, load workers, probe ranks), on a
    box without nvidia-pytriton the carried tritonserver from .carry/, the carried wheels of what it
    lacks (psutil, textual ...), and numpy<2
    for the embedded server's Python backend (reexec_with_numpy1; ``numpy1=False`` for a stage
    that starts no server)."""
    if numpy1:
        reexec_with_numpy1()
    os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1",
                      PYTHONUNBUFFERED="1")
    paths = [str(ROOT)]
    tarball = CARRY / "triton.tar.xz"
    if importlib.util.find_spec("pytriton") is None and tarball.exists():
        if not (CARRY_SITE / "pytriton" / "tritonserver" / "bin" / "tritonserver").exists():
            CARRY_SITE.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["tar", "-C", str(CARRY_SITE.parent), "-xJf", str(tarball)], check=True)
        paths.append(str(CARRY_SITE))
        sys.path.append(str(CARRY_SITE))
        importlib.invalidate_caches()
    if unpack_textual(CARRY / "wheels"):
        paths.insert(1, str(CARRY_TEXTUAL))
        sys.path.insert(0, str(CARRY_TEXTUAL))
    if unpack_missing_wheels(CARRY / "wheels") and str(CARRY_SITE) not in paths:
        paths.append(str(CARRY_SITE))
        sys.path.append(str(CARRY_SITE))
    importlib.invalidate_caches()
    old = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, *([old] if old else [])])


# --------------------------------------------------------------------------- readings


class Sampler(threading.Thread):
    """A reading taken in the background while a run lasts: ``with Sampler(...) as s:``.
    ``skip_s``: the first seconds are a tool's start-up, not load."""

    def __init__(self, skip_s: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.skip_s = skip_s
        self.stop = threading.Event()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join(2)


class GpuBusy(Sampler):
    """NVML utilisation of some GPUs (all by default) every 0.25 s while a run lasts; no figure
    without NVML."""

    def __init__(self, gpus: tuple[int, ...] | None = None, skip_s: float = 0.0) -> None:
        super().__init__(skip_s)
        self.gpus = gpus
        self.per_gpu: dict[int, list[int]] = {}

    def run(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            gpus = self.gpus if self.gpus is not None else tuple(range(pynvml.nvmlDeviceGetCount()))
            handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in gpus}
        except Exception:  # noqa: BLE001 - no driver here: busy % is n/a
            return
        if self.stop.wait(self.skip_s):
            return
        while not self.stop.wait(0.25):
            for i, h in handles.items():
                self.per_gpu.setdefault(i, []).append(int(pynvml.nvmlDeviceGetUtilizationRates(h).gpu))

    def mean(self) -> float | None:
        """Mean over every sample of every GPU."""
        values = [v for seen in self.per_gpu.values() for v in seen]
        return sum(values) / len(values) if values else None

    def each(self) -> list[float]:
        """Mean busy % of each GPU, in GPU order."""
        return [round(sum(v) / len(v), 1) for _, v in sorted(self.per_gpu.items()) if v]

    def means(self) -> dict[str, float]:
        return {f"gpu{i}": round(sum(v) / len(v), 1) for i, v in sorted(self.per_gpu.items()) if v}


def gpu_memory_used_mib() -> list[int]:
    """Memory in use on each GPU (NVML); empty without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return [pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used // 2**20
                for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:  # noqa: BLE001 - no NVML: no figure
        return []


STAT_SECTIONS = ("queue", "compute_input", "compute_infer", "compute_output")


def model_stats(url: str, model: str) -> dict[str, int]:
    """Triton's cumulative statistics of a model over its versions: requests and their ns,
    inferences, executions and each section's ns. Empty when the server does not answer."""
    try:
        with urllib.request.urlopen(f"{url}/v2/models/{model}/stats", timeout=10) as reply:  # noqa: S310 - loopback
            doc = json.loads(reply.read())
    except (OSError, ValueError):
        return {}
    out = dict.fromkeys(("requests", "request_ns", "inferences", "executions", *(f"{k}_ns" for k in STAT_SECTIONS)), 0)
    for s in doc.get("model_stats", []):
        inf = s["inference_stats"]
        out["requests"] += int(inf["success"]["count"])
        out["request_ns"] += int(inf["success"]["ns"])
        out["inferences"] += int(s.get("inference_count", 0))
        out["executions"] += int(s.get("execution_count", 0))
        for k in STAT_SECTIONS:
            out[f"{k}_ns"] += int(inf[k]["ns"])
    return out


def stats_delta(a: dict[str, int], b: dict[str, int]) -> dict[str, float | None]:
    """Average batch and µs per request of each section between two model_stats readings."""
    if not a or not b:
        return {}
    d = {k: b[k] - a[k] for k in a}
    req = d["requests"] or 1
    return {
        "avg_batch": round(d["inferences"] / d["executions"], 1) if d["executions"] else None,
        **{f"{k}_us_per_req": round(d[f"{k}_ns"] / req / 1e3, 1) for k in STAT_SECTIONS},
    }


class ServerQueue(Sampler):
    """Triton's pending-request gauge (requests waiting to execute) summed over some servers,
    every 0.1 s while a run lasts: which tool keeps more requests waiting at the same level."""

    def __init__(self, metrics_urls: list[str], skip_s: float = 0.0) -> None:
        super().__init__(skip_s)
        self.urls = metrics_urls
        self.samples: list[float] = []

    def run(self) -> None:
        if self.stop.wait(self.skip_s):
            return
        while not self.stop.wait(0.1):
            total = 0.0
            for url in self.urls:
                try:
                    with urllib.request.urlopen(url, timeout=2) as reply:  # noqa: S310 - loopback
                        text = reply.read().decode()
                except OSError:
                    return
                total += sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                             if line.startswith("nv_inference_pending_request_count{"))
            self.samples.append(total)

    def mean(self) -> float | None:
        """Mean pending requests over the run's busiest half (start-up and drain left out)."""
        busy = sorted(self.samples)[len(self.samples) // 2:]
        return round(sum(busy) / len(busy), 1) if busy else None


def core_split(client_cores: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the clients' cores, the servers' cores) out of this process's; both () when not split. A
    bench gives the servers the second (EmbeddedServer(cpus=...)) and pins the thread that starts
    the clients to the first (children inherit it): a client's CPU then cannot come out of the
    server's, whichever client costs more per request."""
    cores = sorted(os.sched_getaffinity(0))
    if client_cores <= 0 or client_cores >= len(cores):
        return (), ()
    return tuple(cores[:client_cores]), tuple(cores[client_cores:])


def pin_clients(clients: tuple[int, ...], server_cores: tuple[int, ...]) -> None:
    """This thread on ``clients`` (core_split's first part), and so every client it starts after:
    our load workers and perf_analyzer inherit it. Nothing where the cores are not split."""
    if clients:
        os.sched_setaffinity(0, clients)
        print(f"clients on cores {clients}, the server on {server_cores}", flush=True)
