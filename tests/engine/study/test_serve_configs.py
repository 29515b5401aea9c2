"""The serving study's input, before anything starts: the --serve template, the configs (tpN,
1*N) and what each server of a config is given."""

from __future__ import annotations

import pytest

from engine.errors import UserError
from engine.profiles import scale_out_parts
from engine.server.serve_command import (
    ServerPlan,
    check_template,
    config_servers,
    fill,
    shown_template,
)
from engine.study.serve_configs import serve_configs
from engine.study.variants import is_gpu_variant, variant_units


def test_template_needs_port_and_known_placeholders() -> None:
    assert check_template("vllm serve m --port {port} -tp {tp}") == ["vllm", "serve", "m", "--port", "{port}", "-tp", "{tp}"]
    for bad, words in (("vllm serve m -tp {tp}", "must name {port}"), ("x --port {port} {model}", "unknown placeholder"),
                       ("", "expected a command"), ("x 'unclosed --port {port}", "cannot split")):
        with pytest.raises(UserError, match=words):
            check_template(bad)


def test_fill_and_config_servers() -> None:
    assert fill(["s", "--port={port}", "-tp", "{tp}", "{gpus}"], 9000, 2, "0,1") == ["s", "--port=9000", "-tp", "2", "0,1"]
    assert config_servers("tp2", ["0", "1", "2"]) == [ServerPlan(2, "0,1")]
    assert config_servers("1*2", ["0", "1"]) == [ServerPlan(1, "0"), ServerPlan(1, "1")]
    assert config_servers("1*2", []) == [ServerPlan(1, ""), ServerPlan(1, "")]  # a CPU box: no GPUs


def test_configs_default_and_checked() -> None:
    assert serve_configs(None, 0, None) == ["tp1", "tp2", "1*2"]
    assert serve_configs(None, 4, None) == ["tp1", "tp4", "1*4"]
    assert serve_configs(["1*2", "tp2", "tp1"], 2, None) == ["tp1", "tp2", "1*2"]
    with pytest.raises(UserError, match="needs 4 GPUs; this machine has 2"):
        serve_configs(["tp4"], 2, None)
    with pytest.raises(UserError, match="not a serving config"):
        serve_configs(["2x"], 2, None)
    assert scale_out_parts("1*4") == ("tp1", 4) and variant_units("1*4") == 4 and variant_units("tp2") == 2
    assert is_gpu_variant("tp2") and is_gpu_variant("1*2")


def test_a_key_in_the_template_is_not_recorded() -> None:
    assert shown_template("vllm serve m --api-key sk-1 --port {port}") == "vllm serve m --api-key *** --port {port}"
    assert shown_template("x --hf-token=abc --port {port}") == "x --hf-token=*** --port {port}"


def test_pareto_points_leave_out_what_decides_nothing() -> None:
    from types import SimpleNamespace

    from engine.study.pareto import left_out, pareto_points

    def level(tok_s: float, per_user: float | None, note: str = "", status: str = "stable") -> SimpleNamespace:
        stream = SimpleNamespace(output_tokens_per_s=tok_s, tokens_per_s_per_request=per_user, itl_note=note)
        return SimpleNamespace(result=SimpleNamespace(stream=stream, status=status))

    levels = [level(200.0, 50.0), level(100.0, 80.0, status="unstable"), level(300.0, 40.0, note="read at once")]
    ok = SimpleNamespace(variant="tp1", failed=None, cost_per_hour=0.36, findings=SimpleNamespace(levels=levels))
    points = pareto_points(ok)  # type: ignore[arg-type]
    # $0.36/hr over 200 tokens/s is $0.5 per million; the level whose chunks came together is left out
    assert [(round(p.cost_mtok, 3), p.per_user, p.stable) for p in points] == [(0.5, 50.0, True), (1.0, 80.0, False)]
    failed = SimpleNamespace(variant="1*2", failed="1*2 failed (x)", cost_per_hour=1.0,
                             findings=SimpleNamespace(levels=levels))
    unpriced = SimpleNamespace(variant="tp2", failed=None, cost_per_hour=None, findings=SimpleNamespace(levels=levels))
    assert pareto_points(failed) == []  # type: ignore[arg-type]
    assert left_out([ok, failed, unpriced]) == ["1*2 (failed)", "tp2 (no price)"]  # type: ignore[list-item]
