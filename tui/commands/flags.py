"""Flags that several commands share: the servers to measure and the input data (as the profile
overrides they stand for), positive numbers, and the $/hr of a box."""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING

from engine.errors import UserError

if TYPE_CHECKING:
    from engine.profiles import Load


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, found {text!r}") from None
    if not math.isfinite(value) or value <= 0:  # nan passes "<= 0": a gate that can never fail
        raise argparse.ArgumentTypeError(f"expected a number > 0, found {text!r}")
    return value


def add_endpoint_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", dest="urls", action="append", default=[], metavar="URL",
                   help="a remote Triton's HTTP URL (server.url); give it once per server to spread the load over "
                        "several (server.urls); one ending in /v1 is an OpenAI-compatible server (load.api = openai)")
    p.add_argument("--metrics-url", dest="metrics_urls", action="append", default=[], metavar="URL",
                   help="its /metrics URL, in the order of --url (server.metrics_url / server.metrics_urls)")
    p.add_argument("--allow-mixed", action="store_true",
                   help="several servers whose model configs differ: measure them together anyway")


def endpoint_overrides(args: argparse.Namespace) -> list[str]:
    """--url, --metrics-url and --allow-mixed as profile overrides (the command line's servers
    replace the profile's)."""
    urls, metrics = getattr(args, "urls", []), getattr(args, "metrics_urls", [])
    out = []
    if urls:
        out += ["server.kind=remote", f"server.url={json.dumps(urls[0])}" if len(urls) == 1
                else f"server.urls={json.dumps(urls)}"]
    if metrics:
        out.append(f"server.metrics_url={json.dumps(metrics[0])}" if len(metrics) == 1 and len(urls) <= 1
                   else f"server.metrics_urls={json.dumps(metrics)}")
    if getattr(args, "allow_mixed", False):
        out.append("server.allow_mixed=true")
    return out


def api_override(args: argparse.Namespace) -> list[str]:
    """--url http://HOST:PORT/v1 stands for load.api = openai (engine/transport_table.py's
    api_of_url); put before the user's --set, which may still say otherwise."""
    from engine.transport_table import OPENAI, api_of_url

    urls = getattr(args, "urls", [])
    return ["load.api=openai"] if urls and all(api_of_url(u) == OPENAI for u in urls) else []


def input_data_override(args: argparse.Namespace) -> list[str]:
    """--input-data PATH as the profile override it stands for (a TOML string: any path)."""
    path = getattr(args, "input_data", None)
    return [f"load.input_data={json.dumps(path)}"] if path else []


def slo_override(args: argparse.Namespace) -> list[str]:
    """--slo OBJECTIVES (a streaming run's) as the profile override it stands for (a TOML string: commas kept)."""
    text = getattr(args, "slo", None)
    return [f"load.slo={json.dumps(text)}"] if text else []


def check_input_data(load: Load) -> None:
    """A missing, unreadable or oversized data file, or one that is not what its API reads, is one
    line now, not after the server starts (Triton's values are checked against the model's
    metadata before the first level)."""
    if not load.input_data:
        return
    from engine.transport_table import OPENAI

    if load.api == OPENAI:  # prompts or a trace: read whole, as the sweep will (bounded in size)
        from engine.openai.requests import read_jsonl

        read_jsonl(load.input_data, load.output_tokens, load.block_tokens)
    else:
        from engine.triton.input_data import check_without_the_model

        check_without_the_model(load.input_data)


def parse_costs(items: list[str]) -> dict[int, float]:
    """--cost ``4=14`` or ``4gpu:14``: $/hr of a box with that many GPUs."""
    from engine.format import price_problem

    costs: dict[int, float] = {}
    for item in items:
        gpus, sep, dollars = item.partition("=") if "=" in item else item.partition(":")
        try:
            n, price = int(gpus.removesuffix("gpu")), float(dollars)
        except ValueError:
            n, price = 0, 0.0
        if not sep or n <= 0 or price <= 0:
            raise UserError(f"--cost {item!r}: expected GPUS=DOLLARS_PER_HOUR, e.g. 4=14")
        if (problem := price_problem(price, n)) is not None:
            raise UserError(f"--cost {item!r}: expected {problem}")
        costs[n] = price
    return costs


def one_box_price(name: str | None) -> tuple[float, str] | None:
    """--scale-out-profile: a one-GPU profile's box price, and where it is from."""
    if name is None:
        return None
    from engine.profiles import load_profile

    box = load_profile(name)
    hw = box.hardware
    if hw.gpu_count != 1:
        raise UserError(f"--scale-out-profile {name}: expected a one-GPU profile, found hardware.gpu_count = "
                        f"{hw.gpu_count}")
    if not hw.cost_per_hour:
        raise UserError(f"--scale-out-profile {name}: hardware.cost_per_hour is not set (or use --cost 1=DOLLARS)")
    return hw.cost_per_hour, f"hardware.cost_per_hour of profile {box.name}"
