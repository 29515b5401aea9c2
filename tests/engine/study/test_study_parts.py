"""The study's pure parts: config text -> JSON, variant planning, the index file, the progress state."""

import json
from pathlib import Path

import pytest

from engine import events as ev
from engine.errors import UserError
from engine.server.repository import REPOSITORY_ROOT, variant_files
from engine.study.index import StudyIndex, VariantRun, read_index, recording_paths, write_index
from engine.study.model_control import override_for
from engine.study.pbtxt import pbtxt_to_json
from engine.study.variants import parse_variants, plan_variants, variant_units
from tests.structs import replace
from tui.study_state import StudyState, time_left


def test_pbtxt_to_triton_json():
    text = (REPOSITORY_ROOT / "embedded" / "vit_tiny" / "config.cpu2.pbtxt").read_text()
    cfg = pbtxt_to_json(text)
    assert cfg["name"] == "vit_tiny" and cfg["max_batch_size"] == 32
    assert cfg["input"] == [{"name": "image", "data_type": "TYPE_FP32", "dims": [3, 224, 224]}]
    assert cfg["dynamic_batching"] == {"preferred_batch_size": [4, 8, 16], "max_queue_delay_microseconds": 500}
    assert cfg["instance_group"] == [{"count": 2, "kind": "KIND_CPU"}]
    assert cfg["parameters"]["cpu_threads"] == {"string_value": "1"}


def test_pbtxt_repeated_field_written_once_and_comments():
    cfg = pbtxt_to_json('# c\ninstance_group { count: 1 kind: KIND_GPU gpus: 0 }\nname: "a" # tail\n')
    assert cfg == {"instance_group": [{"count": 1, "kind": "KIND_GPU", "gpus": [0]}], "name": "a"}


def test_every_config_in_the_repository_parses():
    for path in REPOSITORY_ROOT.rglob("*.pbtxt"):
        cfg = pbtxt_to_json(path.read_text())
        assert cfg["name"] == path.parent.name, path
        # an ensemble has no instances of its own: the server runs its steps' instances
        assert cfg.get("platform") == "ensemble" or cfg["instance_group"], path


@pytest.mark.parametrize("text", ['name: "a" name: "b"', "input [ { name: ", "a: {", 'name: "x" }'])
def test_pbtxt_errors_are_user_errors(text):
    with pytest.raises(UserError, match="model config"):
        pbtxt_to_json(text)


def test_override_keeps_the_running_config_and_takes_the_variant_groups():
    running = {"name": "m", "platform": "onnxruntime_onnx", "instance_group": [{"kind": "KIND_GPU", "count": 1}]}
    variant = {"name": "m", "backend": "python", "instance_group": [{"kind": "KIND_GPU", "count": 2, "gpus": [0, 1]}]}
    merged = override_for(variant, running)
    assert merged["platform"] == "onnxruntime_onnx" and "backend" not in merged
    assert merged["instance_group"] == variant["instance_group"]
    assert override_for(variant, None) == variant


def test_cpu_instance_variants_are_named_from_their_files():
    files = variant_files(REPOSITORY_ROOT / "embedded" / "identity")
    assert set(files) == {"cpu", "cpu2"} and files["cpu2"].name == "config.cpu2.pbtxt"
    assert variant_units("cpu2") == 2 and variant_units("cpu") == 1 and variant_units("4x") == 4


def test_parse_variants():
    assert parse_variants("1x, 2x,4x") == ["1x", "2x", "4x"]
    assert parse_variants(None) is None
    for bad in ("", "1x,1x", "two", "1x,gpu"):
        with pytest.raises(UserError, match="--variants"):
            parse_variants(bad)


def test_plan_variants_checks_names_and_gpus():
    assert plan_variants("identity", None, 0) == ["cpu", "cpu2"]
    assert plan_variants("openclip_vit_b32", None, 2) == ["1x", "2x"]
    assert plan_variants("openclip_vit_b32", ["2x", "1x"], 4) == ["1x", "2x"]
    with pytest.raises(UserError, match="has no 3x variant"):
        plan_variants("openclip_vit_b32", ["3x"], 8)
    with pytest.raises(UserError, match="variant 4x needs 4 GPUs; this machine has 2"):
        plan_variants("openclip_vit_b32", ["1x", "4x"], 2)
    with pytest.raises(UserError, match="variant 1x needs 1 GPU; this machine has 0"):
        plan_variants("openclip_vit_b32", ["1x"], 0)
    with pytest.raises(UserError, match="unknown embedded model"):
        plan_variants("nope", None, 0)
    assert plan_variants("m", ["4x"], 0, {"4x": Path("x")}, gpus_known=False) == ["4x"]


def test_index_round_trip_and_missing(tmp_path):
    index = StudyIndex(study_id="s", profile="p", model="m", variants=["1x", "2x", "4x"], server="embedded",
                       slo="p99=50ms", runs=[VariantRun("1x", "a.sqlite", "ok", 0),
                                             VariantRun("2x", "b.sqlite", "interrupted", 130)])
    path = tmp_path / "x.study.json"
    write_index(index, path)
    data = json.loads(path.read_text())
    assert data["missing"] == ["2x", "4x"]
    back = read_index(path)
    assert back.finished == ["1x"] and back.missing == ["2x", "4x"] and back.slo == "p99=50ms"
    assert recording_paths(back, path) == [("1x", tmp_path / "a.sqlite"), ("2x", tmp_path / "b.sqlite")]


@pytest.mark.parametrize("content, needle", [
    (None, "no such study index"), ("{", "not a readable"), ('{"kind": "other"}', "not a gpuscale-tui study"),
    ('{"kind": "gpuscale-tui study", "version": 99}', "newer"),
    ('{"kind": "gpuscale-tui study", "version": 1, "bogus": 1}', "malformed"),
    ('{"kind": "gpuscale-tui study", "version": 1, "study_id": "s", "profile": "p", "model": "m", "variants": ["1x"], '
     '"server": "embedded", "slo": null, "costs": {"two": "abc"}}', r"malformed study index \(costs"),
])
def test_bad_index_is_one_line_user_error(tmp_path, content, needle):
    path = tmp_path / "bad.study.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UserError, match=needle):
        read_index(path)


def _result(level, tp, p99, search=False):
    lat = ev.LatencyStats(count=10, p50=p99 / 4, p95=p99, p99=p99 * 2)
    return ev.LevelResult(mode="concurrency", level=level, index=0, status="stable", batch_size=1, windows=3,
                          merged_windows=3, requests=10, errors=0, throughput_rps=tp, throughput_ips=tp, latency=lat,
                          slo_search=search, ts=100.0 + level)


def test_time_left():
    assert time_left(0.0, 0, 5) is None
    assert time_left(60.0, 3, 6) == pytest.approx(120.0)


def test_study_state_follows_configs_and_time_left():
    state = StudyState()
    state.apply(ev.StudyStarted(study_id="s", model="m", variants=["1x", "2x"], levels=[1, 8], mode="concurrency",
                                server="embedded", slo="p95=10ms", search_steps=2, ts=100.0))
    state.apply(ev.StudyVariantStarted(variant="1x", position=0, ts=100.0))
    state.apply(_result(1, 50.0, 0.004))
    state.apply(_result(8, 300.0, 0.02))
    assert state.configs["1x"].points == [(1.0, 50.0, 0.004, False), (8.0, 300.0, 0.02, False)]  # p95
    assert state.configs["1x"].peak() == (8.0, 300.0)
    # 2 levels in 8 s; left: 2 search levels of 1x + 4 of 2x
    assert state.levels_left() == 6 and state.time_left_s() == pytest.approx(24.0)
    state.apply(ev.StudyVariantFinished(variant="1x", position=0, status="ok", exit_code=0, ts=110.0))
    assert state.levels_left() == 4 and state.position() == (1, 2)
    state.apply(ev.StudyFinished(status="ok", finished=["1x"], missing=["2x"], ts=111.0))
    assert state.time_left_s() == 0.0


def test_time_left_counts_level_time_and_one_server_start_per_config_still_waiting():
    """The time left is the levels' pace plus one server start per config still waiting: the box
    check and the server start never go into the first level's pace (which would make minutes
    look like a quarter of an hour)."""
    state = StudyState()
    state.apply(ev.StudyStarted(study_id="s", model="m", variants=["1x", "2x", "4x"], levels=[16, 64, 128, 256, 512],
                                mode="concurrency", server="embedded", slo="p99=50ms", search_steps=3, ts=0.0))
    state.apply(ev.StudyVariantStarted(variant="1x", position=0, ts=0.0))
    state.apply(ev.LevelStarted(mode="concurrency", level=16, index=0, total=5, ts=35.0))  # after the check and the start
    result = _result(16, 2000.0, 0.005)
    state.apply(replace(result, ts=40.0))
    # 5 s per level x 23 levels left (7 of 1x, 8 each of 2x and 4x) + 35 s per config waiting
    assert state.levels_left() == 23 and state.time_left_s() == pytest.approx(5 * 23 + 35 * 2)
    assert time_left(state.elapsed_s, 1, 23) == pytest.approx(40 * 23)  # elapsed time as the pace: 15 minutes
    state.apply(ev.StudyVariantFinished(variant="1x", position=0, status="ok", exit_code=0, ts=41.0))
    state.apply(ev.StudyVariantStarted(variant="2x", position=1, ts=41.0))
    state.apply(ev.LevelStarted(mode="concurrency", level=16, index=0, total=5, ts=49.0))  # no check: 8 s
    state.apply(replace(result, ts=53.0))
    # levels: 9 s over 2 levels; left: 7 of 2x + 8 of 4x; the shortest start (8 s) for 4x
    assert state.levels_left() == 15 and state.time_left_s() == pytest.approx(9 / 2 * 15 + 8)


def test_cost_by_gpus_on_a_cpu_study_is_refused_in_one_line(tmp_path):
    from engine.profiles import load_profile
    from engine.study.study_source import StudySource

    study = StudySource(load_profile("local"), ["cpu", "cpu2"], record_dir=tmp_path, gpu_count=0, costs={2: 0.6})
    with pytest.raises(UserError, match=r"^--cost 2=0.6: prices a box by its GPUs, and this study's configs "
                                        r"\(cpu, cpu2\) run on the CPU") as caught:
        study.prepare()
    assert "\n" not in str(caught.value) and not list(tmp_path.iterdir())  # nothing written


def test_study_time_left_is_a_range_that_moves_within_a_level():
    """The study's time left follows the running sweep's windows (the sweep's rule), and claims a
    ceiling once a config's time outside its sweep has been measured."""
    state = StudyState()
    state.apply(ev.StudyStarted(study_id="s", model="m", variants=["1x", "2x"], levels=[1, 8], mode="concurrency",
                                server="embedded", ts=0.0))
    load = {"window_ms": 2000, "warmup_s": 1.0, "stable_windows": 3, "max_windows": 6}

    def config(name: str, position: int, t: float) -> float:
        state.apply(ev.StudyVariantStarted(variant=name, position=position, ts=t))
        state.apply(ev.SessionStarted(session_id=name, profile_name="p", profile={"load": load}, mode="sweep",
                                      host={}, ts=t))
        t += 5.0  # the server's start
        lows = []
        for index, level in enumerate((1, 8)):
            state.apply(ev.LevelStarted(mode="concurrency", level=level, index=index, total=2, ts=t))
            for w in range(4):
                state.apply(ev.WindowResult(level=level, index=w, warmup=w == 0, t_start=t, t_end=t + 2.0,
                                            requests=10, errors=0, throughput_rps=5.0, throughput_ips=5.0,
                                            latency=ev.LatencyStats(count=10), audit=ev.ClientAudit(),
                                            stable_so_far=w == 3, ts=t + 2.0))
                t += 2.0
                got = state.time_left()
                assert got is not None and (got.high_s is None) == (position == 0)
                lows.append(got.low_s)
            state.apply(replace(_result(level, 5.0, 0.01), index=index, ts=t))
        assert lows == sorted(lows, reverse=True) and len(set(lows)) > 4  # it moves within each level
        state.apply(ev.SweepFinished(levels=2, stable=2, failed=0, ts=t))
        state.apply(ev.StudyVariantFinished(variant=name, position=position, status="ok", exit_code=0, ts=t + 1.0))
        return t + 1.0

    t = config("1x", 0, 0.0)
    assert state.configs["1x"].overhead_s() == pytest.approx(6.0)  # 5 s start, 1 s stop
    config("2x", 1, t)
