"""The one door to NVML: no other module imports pynvml (nvidia-ml-py).

``binding()`` is the NVML binding in use: pynvml, imported on first use (so that importing the
engine stays cheap and a box without nvidia-ml-py still runs), or the stand-in a unit test
installed with ``stand_in()``. The helpers below are the calls every NVML user needs the same
way: start and stop, one query that is None rather than an exception, NVML's bytes-or-str text,
field values and constants. The binding's constants and error classes are also this module's
attributes (``libnvml.NVML_ERROR_NOT_SUPPORTED``), read from pynvml itself.

It sits below every layer (it imports nothing of the engine), so that telemetry, the box check,
the probe and the embedded server reach NVML the same way.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

_stand_in: Any = None  # a unit test's fake binding; None: pynvml


class NvmlMissing(ImportError):
    """nvidia-ml-py is not installed."""


def _pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise NvmlMissing("nvidia-ml-py (pynvml) is not installed") from None
    return pynvml


NO_LIBRARY = "no NVIDIA driver: libnvidia-ml.so.1 not found"


@functools.cache
def _library_loads() -> bool:
    if not sys.platform.startswith("linux"):
        return True  # pynvml's own search (Windows' paths) decides
    try:
        ctypes.CDLL("libnvidia-ml.so.1")  # the name pynvml loads on Linux
    except OSError:
        return False
    return True


def _binding_installed() -> bool:
    if "pynvml" in sys.modules:
        return sys.modules["pynvml"] is not None
    return importlib.util.find_spec("pynvml") is not None


def library_missing() -> bool:
    """Whether nvidia-ml-py is installed but NVML cannot start for want of its library (no NVIDIA
    driver): then pynvml, about 40 ms of import, is not imported just to say so. False under a
    unit test's stand-in."""
    return _stand_in is None and not _library_loads() and _binding_installed()


def binding() -> Any:
    """The NVML binding in use, not yet initialised. Raises NvmlMissing without nvidia-ml-py."""
    return _stand_in if _stand_in is not None else _pynvml()


@contextmanager
def stand_in(fake: Any) -> Iterator[Any]:
    """Use ``fake`` instead of pynvml for the block (unit tests on a machine without a GPU)."""
    global _stand_in
    previous, _stand_in = _stand_in, fake
    try:
        yield fake
    finally:
        _stand_in = previous


def __getattr__(name: str) -> Any:
    # pynvml's constants, error classes and ctypes structures; its functions go through binding()
    if name.startswith(("NVML", "c_nvml", "nvmlMemory_v")):
        try:
            return getattr(_pynvml(), name)
        except NvmlMissing as exc:
            raise AttributeError(f"{name}: {exc}") from None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------- starting and stopping


def start() -> Any | None:
    """The binding, initialised for the rest of the process; None where NVML cannot start (no
    library, no driver, no permission). For short-lived processes such as a probe rank."""
    if library_missing():
        return None
    try:
        nv = binding()
        nv.nvmlInit()
    except Exception:
        return None
    return nv


def stop(nv: Any) -> None:
    """nvmlShutdown, never an exception: stopping telemetry must not fail a session."""
    try:
        nv.nvmlShutdown()
    except Exception:
        pass


@contextmanager
def opened() -> Iterator[Any | None]:
    """``with opened() as nv:`` the binding initialised for the block (None where NVML cannot
    start), shut down after. NVML counts its inits, so blocks may nest."""
    nv = start()
    try:
        yield nv
    finally:
        if nv is not None:
            stop(nv)


def init_reason(nv: Any, exc: Any) -> str:
    """Why nvmlInit failed, in a few words."""
    value = getattr(exc, "value", None)
    if value == nv.NVML_ERROR_LIBRARY_NOT_FOUND:
        return NO_LIBRARY
    if value == nv.NVML_ERROR_DRIVER_NOT_LOADED:
        return "NVIDIA driver not loaded"
    if value == nv.NVML_ERROR_NO_PERMISSION:
        return "no permission to open the GPUs"
    return str(exc)


# ---------------------------------------------------------------------- one answer at a time


def query(nv: Any, fn_name: str, *args: Any) -> Any:
    """``nv.<fn_name>(*args)``, or None when the binding lacks the function (an older
    nvidia-ml-py) or NVML refuses (not supported, no permission, a lost GPU)."""
    fn = getattr(nv, fn_name, None)
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:  # NVMLError, or a binding whose ctypes signature does not match
        return None


def const(nv: Any, name: str, default: int) -> int:
    """An NVML constant as a plain int. nvidia-ml-py 13 defines some as 1-tuples ``(0,)``,
    which ctypes cannot pass as an argument (docs/results/telemetry_notes.md)."""
    value = getattr(nv, name, default)
    return int(value[0] if isinstance(value, tuple) else value)


def text(value: Any) -> str:
    """NVML strings arrive as bytes from older bindings and as str from newer ones."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def pci_key(pci: Any) -> tuple[int, int, int]:
    """(domain, bus, device) of an nvmlPciInfo_t."""
    return (int(pci.domain), int(pci.bus), int(pci.device))


def field_value(fv: Any) -> float:
    """The number inside an nvmlFieldValue_t, whatever its declared type."""
    u = fv.value
    return {0: u.dVal, 1: u.uiVal, 2: u.ulVal, 3: u.ullVal, 4: u.sllVal, 5: u.siVal, 6: u.usVal}.get(
        int(fv.valueType), u.ullVal
    )


def process_name(nv: Any, pid: int) -> str | None:
    """The name of a process that holds a GPU: psutil's, else NVML's (another container's
    pid namespace), else None (it just exited)."""
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:
        pass
    try:
        return text(nv.nvmlSystemGetProcessName(pid)) or None
    except Exception:
        return None


# ---------------------------------------------------------------------- facts other layers ask for


def driver_versions() -> dict[str, str | None]:
    """The NVIDIA driver and the CUDA version it supports ("12.8"); None without NVML."""
    with opened() as nv:
        if nv is not None:
            try:
                cuda = int(nv.nvmlSystemGetCudaDriverVersion_v2())
                return {"driver": text(nv.nvmlSystemGetDriverVersion()), "cuda": f"{cuda // 1000}.{(cuda % 1000) // 10}"}
            except Exception:
                pass
    return {"driver": None, "cuda": None}


def device_count() -> int:
    """GPUs NVML sees (all of them, whatever CUDA_VISIBLE_DEVICES says); 0 without NVML."""
    with opened() as nv:
        count = query(nv, "nvmlDeviceGetCount") if nv is not None else None
    return int(count) if count is not None else 0


def memory_totals(indices: tuple[int, ...]) -> list[int] | None:
    """Total memory in bytes of these GPUs (NVML indices); None without NVML or for an
    index it does not know."""
    with opened() as nv:
        if nv is None:
            return None
        try:
            return [int(nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i)).total) for i in indices]
        except Exception:
            return None


def uuids(indices: tuple[int, ...]) -> list[str] | None:
    """The UUIDs ("GPU-...") of these GPUs (NVML indices); None without NVML or for an index it
    does not know."""
    with opened() as nv:
        if nv is None:
            return None
        try:
            return [text(nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(i))) for i in indices]
        except Exception:
            return None


# ---------------------------------------------------------------------- CUDA_VISIBLE_DEVICES


@dataclass(frozen=True)
class Visible:
    """The GPUs CUDA_VISIBLE_DEVICES leaves to CUDA, as NVML indices in the variable's order."""

    indices: tuple[int, ...]
    unknown: str | None = None  # the first entry naming no GPU here: CUDA drops it and every one after it


def visible_indices(setting: str | None, uuids: Sequence[str]) -> Visible | None:
    """CUDA's rule for CUDA_VISIBLE_DEVICES (``setting``; None: unset) on a machine whose NVML
    GPU i has UUID ``uuids[i]`` ("" where unknown). An entry is an index or a UUID ("GPU-...",
    or a prefix of one that names a single GPU); the first entry that names no GPU hides itself
    and every entry after it, so "" and "-1" hide every GPU (a repeat is taken as naming none).
    Indices are taken as NVML's, which are CUDA's on a box of one GPU model or under
    CUDA_DEVICE_ORDER=PCI_BUS_ID. None where the entries are MIG instances (not mapped here)."""
    if setting is None:
        return Visible(tuple(range(len(uuids))))
    entries = [e.strip() for e in setting.split(",") if e.strip()]
    if any(e.upper().startswith("MIG-") for e in entries):
        return None
    found: list[int] = []
    for entry in entries:
        if re.fullmatch(r"-?\d+", entry):
            index = int(entry)
            match = [index] if 0 <= index < len(uuids) else []
        elif entry.upper().startswith("GPU-"):
            match = [i for i, u in enumerate(uuids) if u and u.lower().startswith(entry.lower())]
        else:
            match = []
        if len(match) != 1 or match[0] in found:
            return Visible(tuple(found), unknown=None if entry == "-1" else entry)
        found.append(match[0])
    return Visible(tuple(found))


def visible() -> Visible | None:
    """This process's GPUs under CUDA_VISIBLE_DEVICES (visible_indices), through NVML (none
    without NVML)."""
    with opened() as nv:
        count = query(nv, "nvmlDeviceGetCount") if nv is not None else None
        found = []
        for i in range(int(count or 0)):
            handle = query(nv, "nvmlDeviceGetHandleByIndex", i)
            uuid = query(nv, "nvmlDeviceGetUUID", handle) if handle is not None else None
            found.append(text(uuid) if uuid is not None else "")
    return visible_indices(os.environ.get("CUDA_VISIBLE_DEVICES"), found)
