"""Scale out or scale up: the one line, from figures (pure)."""


import pytest

from engine.analysis.gates import GATE_FAILURE_EXIT_CODE
from engine.analysis.saturation import UNSTABLE_MARK
from engine.analysis.scale_out import (
    EITHER,
    SCALE_OUT,
    SCALE_UP,
    Figure,
    Side,
    boxes_label,
    one_line,
    run_failed,
    scale_answer,
)
from engine.analysis.scaling import cost_per_1000
from tests.structs import replace


def side(label, price, peak, slo=None, unstable=False, slo_unstable=False, hint="set a price"):
    def figure(tp, flag):
        return Figure(tp, cost_per_1000(price, tp) if price and tp else None, flag)

    return Side(label, price, hint, figure(peak, unstable), None if slo is False else figure(slo, slo_unstable))


OUT = "4 boxes of 1x RTX 4080"
UP = "1 box of 4x RTX 4080"


def test_labels():
    assert boxes_label(4, "1x", "RTX 4080") == OUT
    assert boxes_label(1, "4x", "RTX 4080") == UP
    assert boxes_label(2, "cpu", "none") == "2 boxes of cpu"


def test_cheaper_per_image_wins_at_the_peak():
    # 4 x $0.30 = $1.20/hr for 2,310/s against $1.40/hr for 1,980/s
    answer = scale_answer(side(OUT, 1.2, 2310.0, slo=False), side(UP, 1.4, 1980.0, slo=False))
    assert answer.choice == SCALE_OUT
    assert answer.line == ("at the peak: 4 boxes of 1x RTX 4080: 2,310 images/s at $0.000144/1000; "
                           "1 box of 4x RTX 4080: 1,980 images/s at $0.000196/1000 → scale out")
    answer = scale_answer(side(OUT, 2.0, 2310.0), side(UP, 1.4, 1980.0))
    assert answer.choice == SCALE_UP and answer.line.endswith("→ scale up")


def test_the_slo_point_decides_when_there_is_one():
    # the scale-out side has the higher peak but the lower throughput within the target
    out, up = side(OUT, 1.2, 2400.0, slo=1000.0), side(UP, 1.2, 2000.0, slo=1800.0)
    assert scale_answer(out, up).choice == SCALE_OUT
    answer = scale_answer(out, up, "p99 <= 50 ms")
    assert answer.choice == SCALE_UP
    assert answer.line.startswith("at p99 <= 50 ms: 4 boxes of 1x RTX 4080: 1,000 images/s")


def test_a_tie_within_two_percent():
    answer = scale_answer(side(OUT, 1.0, 1000.0), side(UP, 1.0, 1015.0))
    assert answer.choice == EITHER and "the same cost per image within 2 %" in answer.line
    assert scale_answer(side(OUT, 1.0, 1000.0), side(UP, 1.0, 1000.0)).choice == EITHER
    assert scale_answer(side(OUT, 1.0, 1000.0), side(UP, 1.0, 1030.0)).choice == SCALE_UP


def test_missing_price_says_what_to_set():
    answer = scale_answer(side(OUT, None, 2310.0, hint="set --cost 1=DOLLARS"), side(UP, 1.4, 1980.0))
    assert answer.choice is None
    assert "4 boxes of 1x RTX 4080: 2,310 images/s (no price)" in answer.line
    assert answer.line.endswith("→ no cost answer: no price for 4 boxes of 1x RTX 4080: set --cost 1=DOLLARS")
    both = scale_answer(side(OUT, None, 2310.0, hint="a"), side(UP, None, 1980.0, hint="b"))
    assert both.line.endswith(f"no price for {OUT}: a; {UP}: b")


def test_unstable_levels_are_marked():
    answer = scale_answer(side(OUT, 1.2, 2310.0, unstable=True), side(UP, 1.4, 1980.0))
    assert f"2,310 images/s ({UNSTABLE_MARK}) at $" in answer.line
    assert answer.line.count(UNSTABLE_MARK) == 1
    at_slo = scale_answer(side(OUT, 1.2, 2310.0, slo=900.0), side(UP, 1.4, 1980.0, slo=800.0, slo_unstable=True),
                          "p99 <= 50 ms")
    assert f"800.0 images/s ({UNSTABLE_MARK})" in at_slo.line


def test_the_slo_not_met_by_one_side():
    answer = scale_answer(side(OUT, 1.2, 2310.0, slo=None), side(UP, 1.4, 1980.0, slo=700.0), "p99 <= 50 ms")
    assert answer.choice == SCALE_UP
    assert "4 boxes of 1x RTX 4080: no level meets p99 <= 50 ms" in answer.line
    assert answer.line.endswith("→ scale up (only 1 box of 4x RTX 4080 meets p99 <= 50 ms)")
    # unpriced, the side that meets the target still wins: the other sells nothing at it
    assert scale_answer(side(OUT, None, 2310.0, slo=500.0), side(UP, 1.4, 1980.0, slo=None),
                        "p99 <= 50 ms").choice == SCALE_OUT


@pytest.mark.parametrize("slo_name, needle", [("p99 <= 50 ms", "neither meets p99 <= 50 ms"),
                                              (None, "neither has a result")])
def test_neither_side_has_a_figure(slo_name, needle):
    answer = scale_answer(side(OUT, 1.2, None, slo=None), side(UP, 1.4, None, slo=None), slo_name)
    assert answer.choice is None and answer.line.endswith(needle)


DIED = "1x*2 failed (server 2 of 2 (GPU 1) (ep2, http://127.0.0.1:8010) exited (tritonserver killed by SIGSEGV))"


def test_a_side_that_failed_decides_nothing_whatever_the_other_did():
    # the case: the scale-out side lost a server and met no level; the other side never wins by it
    out = replace(side(OUT, 1.2, 2310.0, slo=None), failed=DIED)
    up = side(UP, 1.4, 1980.0, slo=1800.0)
    answer = scale_answer(out, up, "p99 <= 50 ms")
    assert answer.choice is None
    assert answer.line == (f"at p99 <= 50 ms: {OUT}: failed; {UP}: 1,800 images/s at $0.000216/1000 "
                           f"→ not decided: {DIED}")
    # whichever side failed, and with figures that would have won
    answer = scale_answer(side(OUT, 1.2, 2310.0), replace(side(UP, 1.4, 1980.0), failed="2x failed (x)"))
    assert answer.choice is None and answer.line.endswith("→ not decided: 2x failed (x)")
    both = scale_answer(replace(out), replace(up, failed="4x failed (y)"))
    assert both.line.endswith(f"→ not decided: {DIED}; 4x failed (y)")


def test_a_side_that_ran_fine_and_met_no_level_still_loses():
    answer = scale_answer(side(OUT, 1.2, 2310.0, slo=None), side(UP, 1.4, 1980.0, slo=1800.0), "p99 <= 50 ms")
    assert answer.choice == SCALE_UP
    assert answer.line.endswith(f"→ scale up (only {UP} meets p99 <= 50 ms)")


def test_run_failed_names_the_config_on_one_line():
    long = "1 level(s) degraded, missing an endpoint (level 8: ep2 answered nothing)\n  Traceback ...\n" + "x" * 300
    assert run_failed("1x*2", "failed", 1, long) == (
        "1x*2 failed (1 level(s) degraded, missing an endpoint (level 8: ep2 answered nothing))")
    cut = run_failed("1x*2", "failed", 2, "endpoints are not apples-to-apples: " + "y" * 300)
    assert cut is not None and len(cut) < 200 and cut.endswith("…)")
    assert run_failed("2x", "failed", 1, None) == "2x failed (exit code 1)"
    assert run_failed("2x", "ok", 0, None) is None
    assert run_failed("2x", "interrupted", 130, None) is None  # not finished: missing, not failed
    # a failed gate judged sound figures: they stand
    assert run_failed("2x", "failed", GATE_FAILURE_EXIT_CODE, "1 gate(s) failed: p99") is None
    assert one_line("  a\tb  \n c") == "a b"


def windows_side(label, price, rate, windows):
    return Side(label, price, "set a price", Figure(rate, cost_per_1000(price, rate), windows=tuple(windows)))


def test_levels_whose_windows_overlap_decide_nothing_between_them():
    # the 4x H200 HTTP study's SLO points: 1x*4 at 128 against 4x at 320, 3.7 % apart, same price
    out = windows_side(OUT, 14.0, 13032.0, [12861.0, 13432.0, 12802.0])
    up = windows_side(UP, 14.0, 12560.0, [12115.0, 12716.0, 12849.0])
    answer = scale_answer(out, up)
    assert answer.choice == EITHER
    assert answer.line.endswith("→ either: 3.6 % apart in cost per image, inside the spread of their own windows "
                                "(the two levels' windows overlap)")
    # the same gap with windows apart is an answer
    apart = windows_side(UP, 14.0, 12560.0, [12500.0, 12560.0, 12620.0])
    assert scale_answer(out, apart).choice == SCALE_OUT
    # one window, or none, says nothing about the spread
    assert scale_answer(out, windows_side(UP, 14.0, 12560.0, [12560.0])).choice == SCALE_OUT
    assert scale_answer(windows_side(OUT, 14.0, 13032.0, []), up).choice == SCALE_OUT
