"""The reducer: what the screens show, from events alone."""

from __future__ import annotations

import pytest

from engine import events as ev
from tests.tui.synthetic import T0, gpu_sample, latency, session_events
from tui.state import GPU_HISTORY, SessionState, compute_seconds


def fold(events: list[ev.Event]) -> SessionState:
    state = SessionState()
    state.apply_all(events)
    return state


def test_full_session_builds_levels_probe_and_outcome() -> None:
    state = fold(session_events())
    assert [r.level for r in state.levels.values()] == [1, 4, 8, 16]
    assert [r.status for r in state.levels.values()] == ["stable", "stable", "unstable", "stable"]
    assert state.sweep_finished is not None and state.sweep_finished.saturation_level == 8
    assert len(state.probe) == 3 and len(state.allreduce) == 1
    assert state.topology is not None and "PCIe" in state.topology.summary
    assert state.ended is not None and state.ended.status == "ok"
    assert not state.running
    assert state.elapsed_s == pytest.approx(state.ended.ts - T0)


def test_running_level_shows_its_latest_window_until_merged() -> None:
    events = session_events(finish_levels=2, end=False)
    state = fold(events)
    row = state.levels[2]
    assert row.status == "running" and row.result is None
    last_window = [e for e in events if isinstance(e, ev.WindowResult)][-1]
    assert row.throughput_ips == last_window.throughput_ips
    assert row.measured_windows == 1 and row.warmup_windows == 1
    assert state.windows == [e for e in events if isinstance(e, ev.WindowResult) and e.level == 8]


def test_progress_counts_levels_and_estimates_time_left_from_finished_levels() -> None:
    state = fold(session_events(finish_levels=2, end=False))
    p = state.progress()
    assert (p.level_index, p.level_total, p.levels_done, p.window_index) == (2, 4, 2, 1)
    assert not p.warmup and not p.stable_so_far
    # engine/analysis/time_left.py on the profile's plan (1 s warm-up, 2 s windows, stable after
    # 3, at most 6): the running level has 1 window of 3; one level after it.
    t = p.time_left
    assert t is not None
    assert t.low_s == pytest.approx(7.0 + 2 * 2.0)
    # the two levels took 0.1 s besides their warm-up and windows, all after the last window
    assert t.likely_s == pytest.approx((1.0 + 3 * 2.0 + 0.1) + 2 * 2.0 + 0.1)
    # the ceiling: 5 windows of 2 s + request_timeout_s (30) + two ticks, and the setup at twice
    # the most measured, for this level, the next, and re-trials up to the budget and one more
    cap = 2.0 + 30.0 + 0.5
    trial = 1.0 + 6 * cap + 0.2
    assert t.high_s == pytest.approx(5 * cap + 0.2 + trial + 120.0 + trial)


def test_time_left_before_any_level_finishes_claims_no_ceiling() -> None:
    events = session_events(finish_levels=0, end=False)
    state = fold(events)
    t = state.progress().time_left
    # 3 levels at their least (1 s warm-up + 3 windows of 2 s) and 2 windows of this one; no
    # setup measured yet: no ceiling
    assert t is not None and t.high_s is None
    assert t.low_s == pytest.approx(3 * 7.0 + 2 * 2.0)


def test_sweep_done_has_no_time_left() -> None:
    p = fold(session_events()).progress()
    assert p.sweep_done and p.time_left is None


def test_gpu_history_is_a_ring_buffer_by_uuid() -> None:
    state = SessionState()
    for i in range(GPU_HISTORY + 5):
        state.apply(gpu_sample(float(i), 2, 0.5))
    assert list(state.gpus) == ["GPU-0000-abcd", "GPU-0001-abcd"]
    track = state.gpus["GPU-0000-abcd"]
    assert len(track.util) == GPU_HISTORY
    assert track.mem_fraction[-1] == pytest.approx(4 / 16)


def test_missing_gpu_values_stay_missing() -> None:
    state = SessionState()
    reading = ev.GpuReading(uuid="GPU-x", index=0, source="triton", util_gpu=None, mem_used=None, mem_total=None)
    state.apply(ev.GpuSample(gpus=[reading], source="triton", interval_s=2.0, ts=T0))
    track = state.gpus["GPU-x"]
    assert list(track.util) == [None] and list(track.mem_fraction) == [None] and list(track.power) == [None]


def test_warnings_are_deduplicated_by_key_and_logged_once() -> None:
    state = SessionState()
    for i in range(3):
        state.apply(ev.Warning(source="telemetry", message=f"slow NVML call #{i}", key="nvml-slow", ts=T0 + i))
    state.apply(ev.Warning(source="load", message="no key here", ts=T0 + 5))
    state.apply(ev.Warning(source="load", message="no key here", ts=T0 + 6))
    assert len(state.notices) == 2
    nvml = state.notices["nvml-slow"]
    assert nvml.count == 3 and nvml.message == "slow NVML call #2" and nvml.last_t == pytest.approx(2.0)
    warning_lines = [line for line in state.log if line.severity == "warning"]
    assert len(warning_lines) == 2


def test_client_bound_is_one_notice_per_level_from_its_result() -> None:
    state = fold(session_events())
    audit = [n for n in state.notices.values() if n.source == "client"]
    assert len(audit) == 1
    assert audit[0].key == "audit:16" and "client CPU" in audit[0].message
    # the level's verdict from its measured windows (the merged result), not one per window: a
    # window's flag (warm-up included) never contradicts the row
    assert audit[0].count == 1


def test_errors_are_notices_with_error_severity() -> None:
    state = SessionState()
    state.apply(ev.Error(source="session", message="tritonserver exited\ntraceback...", fatal=True, ts=T0))
    (notice,) = state.notices.values()
    assert notice.severity == "error"
    assert state.log[-1].severity == "error"


def test_replay_reset_clears_everything() -> None:
    state = fold(session_events())
    state.apply(ev.ReplayReset(position_s=3.0, ts=T0 + 3))
    assert not state.levels and not state.gpus and not state.notices and not state.log
    assert state.session is None and state.t0 is None
    # The events up to the seek target follow and rebuild the same view.
    state.apply_all(session_events())
    assert len(state.levels) == 4


def test_a_second_sweep_in_the_same_session_starts_a_new_table() -> None:
    first = session_events(probe=False, end=False)
    state = fold(first)
    state.apply(ev.LevelStarted(mode="concurrency", level=2, index=0, total=1, ts=T0 + 100))
    assert list(state.levels) == [0] and state.levels[0].level == 2
    assert state.sweep_finished is None and state.sweep_number == 2


def test_level_result_without_its_start_still_makes_a_row() -> None:
    state = SessionState()
    state.apply(ev.LevelResult(
        mode="rate", level=50.0, index=3, status="failed", batch_size=1, windows=2, merged_windows=0,
        requests=0, errors=100, throughput_rps=0.0, throughput_ips=0.0, latency=latency(0.01), duration_s=4.0,
        ts=T0 + 10,
    ))
    row = state.levels[3]
    assert row.status == "failed" and row.errors == 100 and row.duration_s == 4.0


def test_cost_per_1000_images_uses_the_profile_price() -> None:
    state = fold(session_events(cost_per_hour=3.6))
    best = state.best_level()
    assert best is not None and best.level == 16
    # $3.6/h at 1500 images/s: 3.6 / (1500 x 3600) x 1000
    assert state.cost_per_1000(best.result.throughput_ips) == pytest.approx(3.6 / (1500 * 3600) * 1000)
    free = fold(session_events(cost_per_hour=0.0))
    assert free.cost_per_1000(1500.0) is None


def test_best_level_ignores_failed_levels() -> None:
    state = fold(session_events(levels=(1, 4)))
    state.apply(ev.LevelStarted(mode="concurrency", level=64, index=2, total=3, ts=T0 + 200))
    state.apply(ev.LevelResult(
        mode="concurrency", level=64, index=2, status="failed", batch_size=1, windows=1, merged_windows=0,
        requests=10, errors=10, throughput_rps=9999.0, throughput_ips=9999.0, latency=latency(1.0), ts=T0 + 201,
    ))
    assert state.best_level().level == 4


def test_versions_change_only_for_the_sections_an_event_touches() -> None:
    state = fold(session_events(finish_levels=1, end=False))
    before = dict(state.versions)
    state.apply(gpu_sample(state.elapsed_s + 1, 4, 0.5))
    changed = {k for k in before if state.versions[k] != before[k]}
    assert changed == {"gpus", "progress"}


def test_compute_seconds_sums_known_parts_only() -> None:
    server = ev.ServerBreakdown(request_count=1, inference_count=1, execution_count=1, queue=0.5,
                                compute_input=0.001, compute_infer=0.002, compute_output=None)
    assert compute_seconds(server) == pytest.approx(0.003)
    empty = ev.ServerBreakdown(request_count=0, inference_count=0, execution_count=0)
    assert compute_seconds(empty) is None and compute_seconds(None) is None


def test_state_module_does_not_import_textual() -> None:
    import subprocess
    import sys

    code = "import sys, tui.state, tui.tables, tui.glyphs; sys.exit('textual' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_time_left_uses_measured_window_length_when_windows_stretch() -> None:
    events = session_events(finish_levels=0, end=False)
    for e in events:
        if isinstance(e, ev.WindowResult):
            e.t_start = e.t_end - 6.0  # windows held 6 s to reach min_window_requests
    t = fold(events).progress().time_left
    assert t is not None
    # likely: 1 s warm-up + 3 windows x 6 s measured = 19 s for each level after this one, and two
    # windows of it; the low end keeps the plan's 2 s windows (a window is never shorter)
    assert t.likely_s == pytest.approx(3 * 19.0 + 2 * 6.0)
    assert t.low_s == pytest.approx(3 * 7.0 + 2 * 2.0)


def test_phase_reads_sweep_done_once_the_sweep_finishes() -> None:
    state = fold(session_events(probe=False, end=False))
    assert state.phase == "sweep done"


def test_an_interrupted_level_is_not_the_best() -> None:
    state = fold(session_events(levels=(1, 4)))
    state.apply(ev.LevelStarted(mode="concurrency", level=8, index=2, total=3, ts=T0 + 200))
    state.apply(ev.LevelResult(
        mode="concurrency", level=8, index=2, status="interrupted", batch_size=1, windows=1, merged_windows=1,
        requests=10, errors=0, throughput_rps=9999.0, throughput_ips=9999.0, latency=latency(1.0), ts=T0 + 201,
    ))
    assert state.levels[2].status == "interrupted" and state.best_level().level == 4
