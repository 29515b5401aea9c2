"""Python-backend stubs taking turns on a GPU without MPS: found in NVML's process lists, and
said in the report's recommendation (engine/analysis/gpu_sharing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.analysis.gpu_sharing import GpuSharing, gpu_sharing, sharing_advice, taking_turns
from engine.record.exporters import export
from engine.record.reader import Recording
from engine.record.summary import summarize
from tests.engine.record.synthetic_recordings import SyntheticRun, make_recording

STUB = "triton_python_backend_stub"


def _reading(index: int, *names: str) -> dict:
    return {"index": index, "processes": [{"pid": n, "name": name} for n, name in enumerate(names)]}


def test_stubs_are_counted_per_gpu_at_their_most_whatever_form_their_name_takes() -> None:
    samples = [
        [_reading(0, STUB, "triton_python_b", "/opt/tritonserver/backends/python/" + STUB, "python3"),
         _reading(1, STUB)],
        [_reading(0, STUB), _reading(1, STUB, STUB, "nvidia-cuda-mps-server")],
        [_reading(2, "tritonserver", "python3")],
    ]
    assert gpu_sharing(samples) == [GpuSharing(0, 3, False), GpuSharing(1, 2, True), GpuSharing(2, 0, False)]
    assert taking_turns(gpu_sharing(samples)) == [GpuSharing(0, 3, False)]  # GPU 1 had MPS, GPU 2 no stubs
    assert gpu_sharing([[{"processes": []}], [_reading(0, None, "")]]) == [GpuSharing(0, 0, False)]


def test_the_advice_names_the_gpus_and_how_to_start_mps() -> None:
    assert sharing_advice([], embedded=False) is None
    remote = sharing_advice([GpuSharing(0, 3, False), GpuSharing(1, 2, False)], embedded=False)
    assert remote is not None and remote.startswith("Python-backend instances took turns on GPU 0 (3), GPU 1 (2) stubs")
    assert "nvidia-cuda-mps-control -d" in remote and "docs/results/mps_h200.md" in remote
    assert 'server.mps = "on"' in str(sharing_advice([GpuSharing(0, 3, False)], embedded=True))


@pytest.mark.slow
def test_a_recording_with_stubs_taking_turns_says_so_and_one_under_mps_does_not(tmp_path: Path) -> None:
    turns = make_recording(tmp_path, "turns.sqlite", SyntheticRun(variant="2x", gpu_count=2, profile_name="2x",
                                                                gpu_processes=[STUB, STUB, STUB, "tritonserver"]))
    shared = make_recording(tmp_path, "mps.sqlite", SyntheticRun(variant="2x", gpu_count=2, profile_name="2x",
                                                               gpu_processes=[STUB, STUB, "nvidia-cuda-mps-server"]))
    plain = make_recording(tmp_path, "plain.sqlite", SyntheticRun(variant="2x", gpu_count=2, profile_name="2x"))
    # the embedded server says it ran under MPS even where NVML listed no MPS server
    said = make_recording(tmp_path, "said.sqlite", SyntheticRun(variant="2x", gpu_count=2, profile_name="2x",
                                                              gpu_processes=[STUB, STUB], mps=True))
    with Recording.open(turns) as rec:
        assert summarize(rec).gpu_sharing == [GpuSharing(0, 3, False), GpuSharing(1, 3, False)]
        report = Path(export(rec, "md", tmp_path / "a")).read_text()
    assert "Python-backend instances took turns on GPU 0 (3), GPU 1 (3) stubs at once, without MPS" in report
    for path in (shared, plain, said):
        with Recording.open(path) as rec:
            assert "took turns" not in Path(export(rec, "md", tmp_path / path.stem)).read_text()
