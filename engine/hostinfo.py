"""Facts about this machine and the software on it, recorded with every session."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import sys

from engine import libnvml


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    if sys.platform != "linux":  # no /proc/cpuinfo
        return platform.processor() or None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host_facts() -> dict[str, object]:
    import psutil

    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "ram_bytes": psutil.virtual_memory().total,
        "python": sys.version.split()[0],
    }


def software_versions() -> dict[str, str | None]:
    return {
        "gpuscale_tui": _version("gpuscale-tui"),
        "python": sys.version.split()[0],
        "torch": _version("torch"),
        "numpy": _version("numpy"),
        "nvidia_pytriton": _version("nvidia-pytriton"),
        **libnvml.driver_versions(),
    }
