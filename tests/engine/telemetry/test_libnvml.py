"""engine/libnvml.py, the one module that imports pynvml: its helpers on this GPU-less machine
(the real binding, no driver), without the binding, and with the NVML stand-in behind it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from engine import hostinfo, libnvml
from engine.server import gpus as server_gpus
from tests.engine.telemetry.fake_nvml import FakeGpu, FakeNvml

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_no_other_module_imports_pynvml():
    importers = []
    for path in sorted([*(REPO / "engine").rglob("*.py"), *(REPO / "tui").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "pynvml" or n.startswith("pynvml.") for n in names):
                importers.append(str(path.relative_to(REPO)))
    assert importers == ["engine/libnvml.py"]


def test_without_a_driver_every_fact_is_not_available():
    assert libnvml.start() is None  # the real binding, no libnvidia-ml here
    with libnvml.opened() as nv:
        assert nv is None
    assert libnvml.driver_versions() == {"driver": None, "cuda": None}
    assert libnvml.device_count() == 0
    assert libnvml.memory_totals((0,)) is None
    assert server_gpus.smallest_memory_gib((0,)) is None


def test_without_the_binding_it_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(libnvml.NvmlMissing, match="nvidia-ml-py"):
        libnvml.binding()
    assert libnvml.start() is None
    assert libnvml.device_count() == 0
    with pytest.raises(AttributeError):
        _ = libnvml.NVML_SUCCESS


def test_the_stand_in_is_behind_every_user(monkeypatch):
    fake = FakeNvml([FakeGpu(0, "GPU-a", mem_total=80 << 30), FakeGpu(1, "GPU-b", mem_total=40 << 30)])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with libnvml.stand_in(fake):
        assert libnvml.binding() is fake
        assert libnvml.device_count() == 2
        assert server_gpus.visible_gpu_count() == 2
        assert server_gpus.smallest_memory_gib((0, 1)) == 40.0
        assert server_gpus.smallest_memory_gib((0, 5)) is None  # an index NVML does not know
        versions = hostinfo.software_versions()
        assert (versions["driver"], versions["cuda"]) == ("570.00", "12.8")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        assert server_gpus.visible_gpu_count() == 1
    assert fake.shutdown_called  # every opened() block shuts NVML down again
    assert libnvml.binding() is not fake  # back to pynvml after the block


def test_query_is_none_where_nvml_has_no_answer():
    gpu = FakeGpu(0, "GPU-a", unsupported={"nvmlDeviceGetPowerUsage"})
    fake = FakeNvml([gpu])
    assert libnvml.query(fake, "nvmlDeviceGetPowerUsage", gpu) is None  # NVML: not supported
    assert libnvml.query(fake, "nvmlDeviceGetSomethingNewer", gpu) is None  # an older binding
    assert libnvml.query(fake, "nvmlDeviceGetTemperature", gpu, libnvml.NVML_TEMPERATURE_GPU) == 45


def test_small_conversions():
    assert libnvml.text(b"NVIDIA H200") == "NVIDIA H200" and libnvml.text("570.00") == "570.00"

    class Nv:
        NVML_TUPLE = (2,)
        NVML_PLAIN = 3

    assert libnvml.const(Nv, "NVML_TUPLE", 0) == 2  # nvidia-ml-py 13's 1-tuples
    assert libnvml.const(Nv, "NVML_PLAIN", 0) == 3
    assert libnvml.const(Nv, "NVML_ABSENT", 7) == 7
