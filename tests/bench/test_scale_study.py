"""bench scale_study's own rules: perf_analyzer's ranking from its medians (the study's stop rule
and tie), and a figure not measured shown as such."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import ServerQueue
from bench.scale_study import best_medians, peaks_held, ranking, write_md


def test_perf_analyzers_ranking_uses_the_studys_tie_and_stop_rule() -> None:
    # the 4x H200 box's medians: four one-GPU servers against one 4-GPU server
    r = ranking({"1x": 13_995.0, "4x": 19_117.0, "1x*4": 44_747.0}, 4, "1x")
    assert r["scale"] == "scale out" and r["stop_variant"] == "1x"
    assert ranking({"1x": 100.0, "2x": 200.0, "1x*2": 150.0}, 2, "1x") == {
        "scale": "scale up", "stop_variant": "2x", "stop": ranking({"1x": 100.0, "2x": 200.0}, 2, "1x")["stop"]}
    assert ranking({"1x": 100.0, "2x": 190.0, "1x*2": 192.0}, 2, "1x")["scale"] == "either"  # within 2 %
    assert ranking({"cpu": 10.0, "cpu2": 12.0, "cpu*2": 19.0}, 2, "cpu")["scale"] == "scale out"


def test_no_ranking_where_a_config_has_no_figure() -> None:
    r = ranking({"1x": 100.0, "2x": 140.0, "1x*2": None}, 2, "1x")  # the second GPU adds 40 %
    assert r["scale"] is None and r["stop_variant"] == "1x"


def test_a_round_not_measured_reads_not_measured(tmp_path: Path) -> None:
    args = argparse.Namespace(model="m", gpus=2, transports="http", rounds=3)
    rows = [{"config": "1x*2", "transport": "http", "level": 512, "study_peak": 15_255.0, "study_slo": None,
             "ours": {"median": 14_167.0, "min": 13_973.0, "max": 14_712.0}, "pa": None}]
    text = write_md(tmp_path / "s.md", args, [], rows, [])
    row = next(line for line in text.splitlines() if line.startswith("| http | 1x*2"))
    assert "| not measured |" in row and "14,167 (13,973-14,712)" in row and " 0 " not in row


def test_a_config_rounds_at_several_levels_stand_by_their_best_median() -> None:
    # the 2x H200 call: 1x*2 at its peak level and at 128; 2x where no level gave perf_analyzer a figure
    rows = [{"config": "1x*2", "transport": "cuda_shm", "pa": {"median": 26_364.0}},
            {"config": "1x*2", "transport": "cuda_shm", "pa": {"median": 19_879.0}},
            {"config": "2x", "transport": "cuda_shm", "pa": None},
            {"config": "1x", "transport": "http", "pa": {"median": 8_193.0}}]
    assert best_medians(rows, "cuda_shm") == {"1x*2": 26_364.0, "2x": None}


def test_requests_waiting_read_from_the_busier_half_of_the_samples() -> None:
    gauge = ServerQueue([])
    assert gauge.mean() is None  # no sample: no figure, never 0
    gauge.samples = [0.0, 0.0, 10.0, 14.0]  # start-up and drain read empty queues
    assert gauge.mean() == 12.0


def test_each_tools_peak_is_its_best_median_over_the_levels_held() -> None:
    # call 4 of the 2x H200 box: 2x read 17,752 (ours) / 17,044 (pa) at 192, 17,721 / 18,058 at 128
    rows = [{"config": "2x", "transport": "cuda_shm", "level": 192, "study_peak": 18_018.0,
             "ours": {"median": 17_752.0, "min": 17_355.0, "max": 18_592.0},
             "pa": {"median": 17_044.0, "min": 16_672.0, "max": 17_220.0}},
            {"config": "2x", "transport": "cuda_shm", "level": 128, "study_peak": 18_018.0,
             "ours": {"median": 17_721.0, "min": 17_620.0, "max": 18_730.0},
             "pa": {"median": 18_058.0, "min": 16_830.0, "max": 18_120.0}},
            {"config": "1x*2", "transport": "cuda_shm", "level": 256, "study_peak": 27_702.0,
             "ours": {"median": 28_296.0, "min": 28_115.0, "max": 28_377.0},
             "pa": {"median": 26_364.0, "min": 26_084.0, "max": 26_695.0}},
            {"config": "1x", "transport": "cuda_shm", "level": 128, "study_peak": 14_141.0, "ours": None, "pa": None}]
    up, out_, one = peaks_held(rows)
    assert up["pa"]["level"] == 128 and up["ours"]["level"] == 192
    assert up["study_vs_pa"] == "0.998: within 5 %" and up["ours_vs_pa"] == "0.983: within 5 %"
    assert out_["study_vs_pa"] == "1.051: OUTSIDE 5 %" and out_["ours_vs_pa"] == "1.073: OUTSIDE 5 %"
    assert one["study_vs_pa"] == "not measured" and one["pa"] is None  # no figure: never 0


def test_outside_5_percent_but_inside_both_spreads_says_so() -> None:
    rows = [{"config": "1x", "transport": "cuda_shm", "level": 128, "study_peak": None,
             "ours": {"median": 110.0, "min": 95.0, "max": 112.0}, "pa": {"median": 100.0, "min": 90.0, "max": 104.0}}]
    (h,) = peaks_held(rows)
    assert h["ours_vs_pa"] == "1.100: outside 5 %, inside both spreads" and h["study_vs_pa"] == "not measured"
