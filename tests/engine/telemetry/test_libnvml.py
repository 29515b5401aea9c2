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


# --------------------------------------------------------------------------- CUDA_VISIBLE_DEVICES

BOX = ["GPU-0aa1-x", "GPU-1bb2-x", "GPU-1bc3-x", "GPU-3dd4-x"]  # NVML GPU i's UUID


@pytest.mark.parametrize(("setting", "indices", "unknown"), [
    ("2,0", (2, 0), None),  # CUDA's order, NVML's numbers
    (" 1 , 3 ", (1, 3), None),
    ("GPU-3dd4-x,GPU-0aa1-x", (3, 0), None),  # whole UUIDs
    ("GPU-1bc,gpu-0AA", (2, 0), None),  # prefixes that name one GPU, in any case
    ("0,GPU-1b,1", (0,), "GPU-1b"),  # a prefix of two GPUs names neither: the rest is hidden
    ("0,7,1", (0,), "7"),  # past the last GPU
    ("1,abc", (1,), "abc"),
    ("1,1", (1,), "1"),  # named twice
    ("", (), None),
    ("-1", (), None),  # the documented way to hide every GPU: no mistake to report
    ("0,-1,1", (0,), None),
])
def test_cuda_visible_devices_maps_to_nvml_indices(setting, indices, unknown):
    assert libnvml.visible_indices(setting, BOX) == libnvml.Visible(indices, unknown=unknown)


def test_unset_is_every_gpu_and_mig_instances_are_not_mapped():
    assert libnvml.visible_indices(None, BOX) == libnvml.Visible((0, 1, 2, 3))
    assert libnvml.visible_indices("MIG-5c1d-x", BOX) is None
    assert libnvml.visible_indices("0", []) == libnvml.Visible((), unknown="0")  # no NVML


def test_the_server_counts_visible_gpus_by_the_same_rule(monkeypatch):
    fake = FakeNvml([FakeGpu(i, uuid) for i, uuid in enumerate(BOX)])
    with libnvml.stand_in(fake):
        for setting, count in (("GPU-3dd4,0", 2), ("0,7,1", 1), ("", 0), ("MIG-a,MIG-b", 2)):
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", setting)
            assert server_gpus.visible_gpu_count() == count, setting
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
        assert server_gpus.visible_gpu_count() == 4
