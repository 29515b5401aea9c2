"""The serving study's input, before anything starts: the --serve template, the configs (tpN,
1*N) and what each server of a config is given."""

from __future__ import annotations

import pytest

from engine.errors import UserError
from engine.profiles import scale_out_parts
from engine.server.serve_command import ServerPlan, check_template, config_servers, fill
from engine.study.serve_configs import serve_configs, shown_template
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
