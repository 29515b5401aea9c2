"""TargetInfo from metadata (pure) and the worker's tick recorder."""

from __future__ import annotations

import pytest

from engine.errors import UserError
from engine.load.worker import TickBuffer
from engine.triton.target import Target, target_info_from

T = Target("http://127.0.0.1:1", "m")


def test_target_info_from_metadata_and_config():
    meta = {"name": "m", "versions": ["1"], "inputs": [{"name": "image", "datatype": "FP32", "shape": [-1, 3, 224, 224]}],
            "outputs": [{"name": "embedding", "datatype": "FP32", "shape": [-1, 512]}]}
    info = target_info_from(meta, {"max_batch_size": 32}, "2.51.0", T)
    assert info.inputs == [{"name": "image", "datatype": "FP32", "shape": [-1, 3, 224, 224]}]
    assert info.outputs[0]["name"] == "embedding"
    assert info.max_batch_size == 32 and info.triton_version == "2.51.0" and info.versions == ["1"]


@pytest.mark.parametrize(
    "meta, message",
    [
        ({"name": "m"}, "metadata has no input list"),
        ({"inputs": []}, "has no inputs to send"),
        ({"inputs": [{"name": "x", "shape": [1]}]}, "malformed input"),
    ],
)
def test_unusable_metadata_is_one_clear_line(meta, message):
    with pytest.raises(UserError, match=message) as err:
        target_info_from(meta, {}, None, T)
    assert "\n" not in str(err.value)


def test_recorder_attributes_by_completion_time_and_flushes_every_tick():
    t0, tick = 1_000_000_000, 250_000_000
    tick_buffer = TickBuffer(worker=3, level_index=2, t0_ns=t0, tick_ns=tick, rate_mode=True)
    tick_buffer.ok(5, 4, t0 + 10, 1, 3, 1)  # tick 0
    tick_buffer.error("timeout", "slow", t0 + tick - 1)  # tick 0
    tick_buffer.ok(6, 6, t0 + tick, 1, 4, 1)  # tick 1 (boundary belongs to the next tick)
    tick_buffer.ok(7, 7, t0 + 3 * tick + 5, 2, 4, 1)  # tick 3: tick 2 stays empty
    tick_buffer.sent_one(t0 + 3 * tick + 6, late=True)
    ticks = tick_buffer.flush(3)
    assert [t.tick for t in ticks] == [0, 1, 2, 3]
    assert [t.ok for t in ticks] == [1, 1, 0, 1]
    assert ticks[0].errors == {"timeout": 1} and ticks[0].messages == {"timeout": ["slow"]}
    assert ticks[0].latency_ns.tolist() == [5] and ticks[0].latency_uncorrected_ns.tolist() == [4]
    assert ticks[3].sent == 1 and ticks[3].late == 1
    assert all(t.worker == 3 and t.level_index == 2 for t in ticks)
    # nothing more completed: the next flush still reports the (empty) tick 4
    (empty,) = tick_buffer.flush(4)
    assert empty.tick == 4 and empty.ok == 0 and empty.completed == 0
