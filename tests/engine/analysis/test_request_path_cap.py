"""The request path capping every config of a study, from synthetic evidence: when it holds, the
line names the bound, the transport and the request size; when the GPUs may be the limit, None."""

from __future__ import annotations

import pytest

from engine.analysis.request_path_cap import (
    CLIENT,
    HOST_CPU,
    OUTSIDE,
    WIRE,
    PeakEvidence,
    advice,
    request_path_cap,
)
from tests.structs import replace

VIT_BYTES = 602_112  # one 3x224x224 FP32 image, as the ViT's requests carry it


def _issue_box(**changes: object) -> list[PeakEvidence]:
    """1x, 2x and 1x*2 over HTTP on a two-GPU box, every one near 8-9k images/s; the larger
    configs' client audit flagged their peaks."""
    configs = [
        PeakEvidence("1x", 1, 7_900.0, gpu_busy_percent=88.0, transport="http", request_bytes=VIT_BYTES),
        PeakEvidence("2x", 2, 9_000.0, client_bound=True, loop_lag_p99=0.0142, gpu_busy_percent=45.0,
                     transport="http", request_bytes=VIT_BYTES),
        PeakEvidence("1x*2", 2, 9_050.0, client_bound=True, client_reasons=("load workers at 98 % CPU",),
                     gpu_busy_percent=47.0, transport="http", request_bytes=VIT_BYTES),
    ]
    return [replace(c, **changes) for c in configs] if changes else configs


def test_every_config_at_one_ceiling_with_the_client_bound_is_not_a_gpu_question() -> None:
    cap = request_path_cap(_issue_box())
    assert cap is not None
    assert cap.line == ("not a GPU question here: every config tops out near 9,050 images/s (1x 7,900, 2x 9,000, "
                        "1x*2 9,050) over http with 602 KB requests (the request path: client bound at 2x, 1x*2); "
                        "measure over shared memory on this box (load.transport = cuda_shm), or with load from "
                        "more hosts (--hosts N)")
    assert "stop at" not in cap.line
    assert cap.ceiling == 9_050.0 and cap.request_bytes == VIT_BYTES and cap.transports == ("http",)
    assert cap.bounds == ((CLIENT, ("2x", "1x*2")),)
    assert cap.evidence[1] == "2x: peak 9,000 images/s; client bound (loop lag p99 14.2 ms); GPUs 45% busy"
    assert cap.evidence[0] == "1x: peak 7,900 images/s; no request-path bound recorded at its peak; GPUs 88% busy"
    assert cap.short == "not a GPU question here: both top out near the request path's ceiling (9,050 images/s over http)"
    # the answer line: the ceiling, the bound, one next step; the figures above stand in cap.line
    assert cap.answer == ("not a GPU question: the request path (client bound) caps every config near 9,050 "
                          "images/s; next: try load.transport = cuda_shm")


@pytest.mark.parametrize(("evidence", "bound"), [
    ({"host_full": True, "host_cpu_percent": 96.0}, HOST_CPU),
    ({"near_wire": True, "wire_peak": 9_400.0}, WIRE),
    ({"outside_server": True}, OUTSIDE),
])
def test_each_request_path_bound_is_named(evidence: dict[str, object], bound: str) -> None:
    configs = _issue_box(client_bound=False, client_reasons=(), loop_lag_p99=None)
    configs = [configs[0], *(replace(c, **evidence) for c in configs[1:])]
    cap = request_path_cap(configs)
    assert cap is not None and cap.bounds == ((bound, ("2x", "1x*2")),)
    assert f"(the request path: {bound} at 2x, 1x*2)" in cap.line


def test_a_request_size_not_measured_is_said_never_zero() -> None:
    cap = request_path_cap(_issue_box(request_bytes=0))
    assert cap is not None and "over http with requests of a size not measured (" in cap.line
    assert " 0 B" not in cap.line and cap.request_bytes == 0


def test_gpus_that_scale_keep_the_ordinary_answer() -> None:
    configs = _issue_box()
    configs[1] = replace(configs[1], peak=15_000.0)  # 2x nearly doubles 1x: the GPUs were the limit
    assert request_path_cap(configs) is None


def test_flat_peaks_without_a_request_path_bound_keep_the_ordinary_answer() -> None:
    # 2x gives nothing over 1x, but nothing on the request path was at its limit: a GPU-side
    # cause (instances, batching) the ordinary answer and verdicts speak of
    assert request_path_cap(_issue_box(client_bound=False, client_reasons=(), loop_lag_p99=None)) is None
    # one larger config without a bound is enough to keep it
    configs = _issue_box()
    configs[2] = replace(configs[2], client_bound=False, client_reasons=())
    assert request_path_cap(configs) is None


def test_busy_gpus_in_a_larger_config_keep_the_ordinary_answer() -> None:
    configs = _issue_box()
    configs[1] = replace(configs[1], gpu_busy_percent=92.0)
    assert request_path_cap(configs) is None


def test_a_config_without_a_peak_or_a_single_size_decides_nothing() -> None:
    configs = _issue_box()
    assert request_path_cap([configs[0], replace(configs[1], peak=None), configs[2]]) is None
    assert request_path_cap(configs[:1]) is None
    assert request_path_cap([configs[1], configs[2]]) is None  # 2x and 1x*2: the same size


def test_the_advice_follows_the_transport_and_where_the_server_is() -> None:
    assert advice(["http"], server_local=False) == ("measure with load from more hosts (--hosts N), or on the GPU "
                                                    "box itself over shared memory (load.transport = auto)")
    assert advice(["system_shm"], server_local=True) == ("send more items per request (load.batch_size) or the "
                                                         "inputs in GPU memory (load.transport = cuda_shm)")
    assert advice(["cuda_shm"], server_local=True) == "send more items per request (load.batch_size)"
    assert "load.transport = system_shm" in advice(["http"], server_local=True, unit="CPU instance")
    cap = request_path_cap(_issue_box(transport="cuda_shm"))
    assert cap is not None and "over cuda_shm with 602 KB requests" in cap.line and "--hosts" not in cap.line
    assert cap.answer.endswith("; next: a larger load.batch_size")
    remote = request_path_cap(_issue_box(), server_local=False)
    assert remote is not None and remote.answer.endswith("; next: more load hosts (--hosts N)")


def test_cpu_instances_are_named_as_such() -> None:
    configs = [replace(c, variant=v, gpu_busy_percent=None, on_gpus=False)
               for c, v in zip(_issue_box()[:2], ("cpu", "cpu2"), strict=True)]
    cap = request_path_cap(configs, unit="CPU instance")
    assert cap is not None and cap.line.startswith("not a CPU instance question here: every config tops out near 9,000")
    assert cap.evidence[0] == "cpu: peak 7,900 images/s; no request-path bound recorded at its peak"  # no GPU to speak of


def test_a_full_host_is_no_request_path_bound_for_a_model_computing_on_it() -> None:
    # cpu2's client flagged, waiting for the cores the model computes on: the model's limit too
    cpu = [replace(c, variant=v, gpu_busy_percent=None, on_gpus=False, host_full=True, host_cpu_percent=99.0)
           for c, v in zip(_issue_box()[:2], ("cpu", "cpu2"), strict=True)]
    assert cpu[1].client_bound and cpu[1].bounds == () and request_path_cap(cpu, unit="CPU instance") is None
    assert "host CPU full" not in cpu[1].describe() and "client bound" not in cpu[1].describe()
    # on GPUs the same host is the request path's: both bounds count
    gpu = [replace(c, host_full=True, host_cpu_percent=99.0) for c in _issue_box()]
    assert gpu[1].bounds == (CLIENT, HOST_CPU)
    cap = request_path_cap(gpu)
    assert cap is not None and "(the request path: client bound at 2x, 1x*2; host CPU full at 1x, 2x, 1x*2)" in cap.line


def test_a_host_whose_cpu_other_processes_took_names_them_and_a_quieter_box() -> None:
    # the larger configs' host full, other processes on 84 % of it (engine/analysis/host_cpu_share.py)
    configs = _issue_box(client_bound=False, client_reasons=(), loop_lag_p99=None)
    configs = [configs[0], *(replace(c, host_full=True, host_cpu_percent=99.0, host_others_percent=84.0)
                             for c in configs[1:])]
    cap = request_path_cap(configs)
    assert cap is not None
    assert cap.answer == ("not a GPU question: other processes took this host's CPU (others 84%), capping every "
                          "config near 9,050 images/s; next: a quieter box")
    assert cap.line.endswith("other processes on this host took most of its CPU: stop the other work or measure on "
                             "a quieter box (others 84% of the host)")
    for text in (cap.answer, cap.line):  # the faster path answers a problem this box does not have
        assert "shared memory" not in text and "--hosts" not in text and "load.transport" not in text
    assert cap.evidence[1] == "2x: peak 9,000 images/s; host CPU full (99% busy, others 84%); GPUs 45% busy"
