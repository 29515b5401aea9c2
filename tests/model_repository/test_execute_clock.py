"""The embedded ViT's per-instance execute timing (model_repository/embedded/execute_clock.py):
sections and gaps add up, snapshots difference into per-batch means, files appear atomically."""

import importlib.util
import json
import sys

from engine.server.repository import EMBEDDED_ROOT

spec = importlib.util.spec_from_file_location("execute_clock", EMBEDDED_ROOT / "execute_clock.py")
ec = importlib.util.module_from_spec(spec)
sys.modules.setdefault("execute_clock", ec)
spec.loader.exec_module(ec)


class FakeClock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now


def _batch(clock, tick, sections, gap):
    tick.now += gap
    clock.begin()
    for name, ns in sections:
        tick.now += ns
        clock.section(name)
    tick.now += 1_000
    clock.end(requests=2, images=64, inputs_elsewhere=1)


def test_sections_and_gaps_are_summed_per_batch(tmp_path):
    tick = FakeClock()
    clock = ec.ExecuteClock(tmp_path / "m.json", "cuda:1", clock=tick)
    _batch(clock, tick, [("inputs", 5_000), ("stage", 20_000)], gap=7_000)  # first: no gap counted
    first = clock.snapshot()
    _batch(clock, tick, [("inputs", 3_000), ("stage", 40_000)], gap=9_000)
    _batch(clock, tick, [("inputs", 5_000), ("stage", 60_000)], gap=11_000)
    assert first["totals_ns"] == {"gap": 0, "inputs": 5_000, "stage": 20_000, "responses": 1_000}
    delta = ec.per_batch_us(first, clock.snapshot())
    assert delta["batches"] == 2 and delta["images"] == 128 and delta["inputs_elsewhere"] == 2 and delta["idle_gaps"] == 0
    assert delta["gap_us"] == 10.0 and delta["inputs_us"] == 4.0 and delta["stage_us"] == 50.0
    assert delta["responses_us"] == 1.0


def test_files_are_written_at_most_every_interval(tmp_path):
    tick = FakeClock()
    clock = ec.ExecuteClock(tmp_path / "m.json", "cuda:0", clock=tick)
    _batch(clock, tick, [("inputs", 1_000)], gap=0)  # written: nothing before
    assert json.loads((tmp_path / "m.json").read_text())["batches"] == 1
    _batch(clock, tick, [("inputs", 1_000)], gap=1_000)  # 3 µs later: not rewritten
    assert json.loads((tmp_path / "m.json").read_text())["batches"] == 1
    tick.now += int(ec.WRITE_EVERY_S * 1e9)
    _batch(clock, tick, [("inputs", 1_000)], gap=0)
    assert json.loads((tmp_path / "m.json").read_text())["batches"] == 3
    assert not list(tmp_path.glob("*.tmp"))


def test_off_unless_the_environment_names_a_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(ec.TIMING_ENV, raising=False)
    assert ec.ExecuteClock.from_env("vit", "cuda:0") is None
    monkeypatch.setenv(ec.TIMING_ENV, str(tmp_path / "t"))
    clock = ec.ExecuteClock.from_env("vit", "cuda:0")
    assert clock is not None and clock.path.parent == tmp_path / "t" and clock.path.name.startswith("vit-cuda0-")


def test_a_pause_between_runs_is_not_a_gap(tmp_path):
    tick = FakeClock()
    clock = ec.ExecuteClock(tmp_path / "m.json", "cuda:0", clock=tick)
    _batch(clock, tick, [("inputs", 1_000)], gap=0)
    first = clock.snapshot()
    _batch(clock, tick, [("inputs", 1_000)], gap=int(ec.IDLE_GAP_S * 1e9) + 1)  # the load paused
    _batch(clock, tick, [("inputs", 1_000)], gap=4_000)
    delta = ec.per_batch_us(first, clock.snapshot())
    assert delta["idle_gaps"] == 1 and delta["batches"] == 2
    assert delta["gap_us"] == 4.0  # one real gap, over the one batch that had it
