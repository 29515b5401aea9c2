"""The event contract: every kind survives JSON; versions and kinds are checked."""

import json

import pytest

from engine import events as ev


def _samples() -> list[ev.Event]:
    lat = ev.LatencyStats(count=10, mean=0.01, min=0.005, p50=0.009, p90=0.012, p95=0.013, p99=0.02, max=0.03)
    server = ev.ServerBreakdown(request_count=10, inference_count=20, execution_count=5, queue=0.001,
                                compute_infer=0.004, avg_batch_size=4.0)
    audit = ev.ClientAudit(cpu_percent=35.0, client_bound=True, reasons=["cpu"])
    gpu = ev.GpuReading(uuid="GPU-1", index=0, source="nvml", util_gpu=97.0, mem_used=1 << 30,
                        processes=[{"pid": 1, "name": "tritonserver", "mem_used": 1 << 20}])
    return [
        ev.SessionStarted(session_id="s", profile_name="local", profile={"name": "local"}, mode="sweep"),
        ev.SessionEnded(status="ok"),
        ev.PhaseChanged(phase="sweep"),
        ev.ServerReady(http_url="http://127.0.0.1:1", metrics_url=None, embedded=True, model="m"),
        ev.ServerStopped(),
        ev.LevelStarted(mode="concurrency", level=8, index=2, total=7),
        ev.WindowResult(level=8, index=0, warmup=False, t_start=1.0, t_end=2.0, requests=10, errors=0,
                        throughput_rps=10.0, throughput_ips=10.0, latency=lat, server=server, audit=audit),
        ev.LevelResult(mode="concurrency", level=8, index=2, status="stable", batch_size=1, windows=3,
                       merged_windows=3, requests=30, errors=0, throughput_rps=10.0, throughput_ips=10.0,
                       latency=lat, server=server, latency_uncorrected=lat),
        ev.InputDataUsed(path="/data/photos.json", sha256="ab" * 32, entries=12, requests=12, source="json",
                         validated=True),
        ev.SweepFinished(levels=7, stable=7, failed=0, saturation_level=32),
        ev.GpuSample(gpus=[gpu], source="nvml", interval_s=1.0),
        ev.HostSample(cpu_percent=50.0, per_core=[40.0, 60.0]),
        ev.Topology(gpus=[{"uuid": "GPU-1"}], links=[ev.GpuLink(a="GPU-1", b="GPU-2", nvlink_count=18)]),
        ev.ProbeResult(model="mlp", params=258_000, strategy="ddp", scaling="weak", world_size=2,
                       per_device_batch=32, global_batch=64, device="cpu", backend="gloo", precision="fp32",
                       samples_per_s=ev.StatSummary(mean=100.0, ci_low=90.0, ci_high=110.0, n=3),
                       step_time_s=ev.StatSummary(mean=0.3, ci_low=None, ci_high=None, n=3)),
        ev.AllReduceResult(world_size=2, backend="gloo", device="cpu",
                           rows=[ev.AllReduceRow(size_bytes=1024, time_s=1e-4, algbw_gbps=0.01, busbw_gbps=0.01)]),
        ev.BoxCheck(verdict="no-go", summary="NO-GO: 1 fail", gpus=1,
                    items=[ev.CheckItem(name="pcie link", scope="GPU 0", status="fail", measured="Gen4 x4",
                                        expected="Gen4 x16")], facts={"host": {"cores": 8}}),
        ev.Warning(source="telemetry", message="no NVML", key="nvml"),
        ev.Error(source="load", message="boom", fatal=True),
        ev.StudyStarted(study_id="s", model="m", variants=["1x", "2x"], levels=[1, 8], mode="concurrency",
                        server="embedded", slo="p99=50ms", search_steps=4),
        ev.StudyVariantStarted(variant="1x", position=0, how="embedded server restarted"),
        ev.StudyVariantFinished(variant="1x", position=0, status="ok", exit_code=0, recording="a.sqlite"),
        ev.StudyFinished(status="interrupted", finished=["1x"], missing=["2x"], exit_code=130),
        ev.WireCeiling(model="openclip_vit_b32", transport="http", batch_size=1, bytes_per_item=602_112,
                       request_bytes=602_112, input_shape=[150_528],
                       levels=[ev.WireLevel(level=64, status="stable", throughput_ips=10_100.0, throughput_rps=10_100.0,
                                            p50=0.006, p99=0.011, client_bound=False)],
                       peak_ips=10_100.0, peak_level=64, saturated=True),
    ]


def test_every_registered_kind_has_a_sample():
    sampled = {e.kind for e in _samples()}
    assert set(ev.event_kinds()) - sampled <= {"replay_reset"}


@pytest.mark.parametrize("event", _samples(), ids=lambda e: e.kind)
def test_round_trip_through_json(event):
    data = json.loads(json.dumps(event.to_dict()))
    assert data["kind"] == event.kind and data["v"] == ev.SCHEMA_VERSION
    back = ev.event_from_dict(data)
    assert back == event
    assert type(back) is type(event)


def test_newer_version_and_unknown_kind_are_rejected():
    data = ev.PhaseChanged(phase="x").to_dict()
    with pytest.raises(ev.EventSchemaError, match="newer"):
        ev.event_from_dict({**data, "v": ev.SCHEMA_VERSION + 1})
    with pytest.raises(ev.UnknownEventKind, match="unknown event kind"):
        ev.event_from_dict({**data, "kind": "teleport"})


def test_unknown_fields_from_a_newer_minor_version_are_ignored():
    data = {**ev.PhaseChanged(phase="x").to_dict(), "added_later": 1}
    assert ev.event_from_dict(data) == ev.PhaseChanged(phase="x", ts=data["ts"])
