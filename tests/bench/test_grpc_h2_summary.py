"""The grpc_h2 stage's table: ratios to perf_analyzer, and to its --async client when that ran."""

from bench.grpc_h2 import summary


def _row(tool: str, rnd: int, infer_s: float | None) -> dict:
    return {"level": 256, "round": rnd, "tool": tool, "ok": infer_s is not None, "infer_s": infer_s, "cpu_us_per_req": 100.0}


def test_each_round_is_divided_by_its_own_anchor_and_by_the_async_client() -> None:
    rows = [_row("grpc", 0, 110.0), _row("pa", 0, 100.0), _row("pa_async", 0, 110.0),
            _row("grpc", 1, 120.0), _row("pa", 1, 100.0), _row("pa_async", 1, 100.0)]
    lines = summary(rows, [256], ["grpc", "pa", "pa_async"])
    ours = next(x for x in lines if "ours grpc" in x)
    assert "| 1.15 [1.10-1.20] |" in ours  # 110/100 and 120/100
    assert ours.endswith(" 1.10 [1.00-1.20] |")  # 110/110 and 120/100
    assert next(x for x in lines if "--async" in x and x.startswith("| 256")).endswith(" 1 |")
    assert lines[0].endswith("/ perf_analyzer --async |")


def test_a_failed_run_is_shown_as_none_and_left_out_of_the_ratio() -> None:
    rows = [_row("grpc", 0, 110.0), _row("pa", 0, 100.0), _row("grpc", 1, None), _row("pa", 1, 100.0)]
    lines = summary(rows, [256], ["grpc", "pa"])
    ours = next(x for x in lines if "ours grpc" in x)
    assert "110, none" in ours and "| 1.10 [1.10-1.10] |" in ours
    assert "--async" not in lines[0]
