"""Profiles: one TOML file describes a box, its server, its model and how to measure it.

Each key is declared once: a field of the dataclasses below, whose annotation holds its type,
bounds and words (msgspec's ``Meta``, engine/table_schema.py's ``Check``). engine/table_schema.py
checks a document against them, and every error names the file, the key, what was expected and
what was found (credentials masked), in one line.
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import math
import re
import sys
import tomllib
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

import msgspec
from msgspec import Meta

from engine import table_schema
from engine.errors import UserError
from engine.format import price_problem
from engine.length_spec import LengthSpec, length_problem, parse_length
from engine.modes import LoadMode
from engine.suggest import closest, did_you_mean
from engine.table_schema import NOT_A_KEY, Check
from engine.transport_table import AUTO, DEFAULT_TRANSPORT, OPENAI, TRANSPORTS, TRITON

# the repository's profiles/ (a source checkout, an editable install); a wheel carries the same
# files as package data in engine/bundled_profiles (setup.py)
_PACKAGED_PROFILES = Path(__file__).resolve().parent / "bundled_profiles"
PROFILES_DIR = _PACKAGED_PROFILES if _PACKAGED_PROFILES.is_dir() else Path(__file__).resolve().parent.parent / "profiles"
DEFAULT_PROFILE = "local"
DEFAULT_CONCURRENCY = [1, 4, 8, 16, 32, 64, 128]
MAX_IN_FLIGHT = 4096  # per level; beyond this the client, not the server, is what you measure

VARIANTS = ("auto", "cpu", "1x", "2x", "4x", "8x")
CPU_INSTANCES_VARIANT = re.compile(r"^cpu[1-9]\d*$")  # "cpu2": config.cpu2.pbtxt, 2 CPU instances
# scale-out: "1x*4" is 4 embedded servers of the 1x config, one per GPU; "cpu*2" 2 of the cpu config
SCALE_OUT_VARIANT = re.compile(r"^(1x|cpu(?:[1-9]\d*)?|1)\*([1-9]\d*)$")
# the LLM serving study (study --serve): "tp2" is one server of tensor-parallel size 2, "1*2" two
# one-GPU replicas of it (each server is "tp1")
TP_VARIANT = re.compile(r"^tp[1-9]\d*$")


def scale_out_parts(variant: str) -> tuple[str, int] | None:
    """"1x*4" -> ("1x", 4): the config each server runs and how many servers; None for a
    variant served by one server ("1x", "4x", "cpu2", "auto")."""
    match = SCALE_OUT_VARIANT.match(variant)
    if match is None:
        return None
    return ("tp1" if match.group(1) == "1" else match.group(1)), int(match.group(2))


class ProfileError(UserError):
    pass


# --------------------------------------------------------------------------- rules beyond bounds
# Each returns what was expected when the value is wrong (any value a file may hold), else None.


def _http_url(v: object) -> str | None:
    if not isinstance(v, str):
        return "an http:// or https:// URL"
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in v):
        return "an http:// or https:// URL without spaces or control characters"
    try:
        parts = urlsplit(v)
    except ValueError:  # "http://[::1": an unclosed IPv6 bracket
        return "an http:// or https:// URL with a valid host"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "an http:// or https:// URL with a host"
    try:
        _ = parts.port  # urlsplit checks the port only when asked
    except ValueError:
        return "an http:// or https:// URL with a valid port"
    return None


URL_LIST = "a non-empty list of http:// or https:// URLs"


def _http_urls(v: object) -> str | None:
    return URL_LIST if not isinstance(v, list) or not v or any(_http_url(u) for u in v) else None


# one objective of load.slo (engine/analysis/stream_slo.py reads them): figure, percentile, bound and unit
SLO_PART = re.compile(r"^(ttft|itl|latency)_p(50|90|95|99)=([0-9]*\.?[0-9]+)(ms|s)$")


def _slo_text(v: object) -> str | None:
    expected = ("objectives like 'ttft_p99=200ms,itl_p99=50ms' (ttft, itl or latency; p50, p90, p95 or p99; "
                "a bound above 0 in ms or s; each once)")
    if isinstance(v, list) and all(isinstance(p, str) for p in v):
        v = ",".join(v)
    if not isinstance(v, str):
        return expected
    names = []
    for part in (p.replace(" ", "") for p in v.split(",") if p.strip()):
        match = SLO_PART.match(part)
        if match is None or float(match.group(3)) <= 0:
            return expected
        names.append(part.split("=")[0])
    return None if len(names) == len(set(names)) else expected


# load.input_tokens / load.output_tokens: a length distribution, "128", "128+-32", "normal:128:32",
# "lognormal:128:0.5" (engine/length_spec.py)
def token_count(v: object) -> LengthSpec | None:
    """load.input_tokens / load.output_tokens as a length distribution; None for a value that is not one."""
    return parse_length(v)


def _token_count(v: object) -> str | None:
    return None if v == "" else length_problem(v)


def _bind_address(v: object) -> str | None:
    if not isinstance(v, str) or not v.strip():
        return "an IP address to listen on, e.g. 127.0.0.1"
    try:
        ipaddress.ip_address(v)
    except ValueError:
        return "an IP address to listen on, e.g. 127.0.0.1 or 0.0.0.0"
    return None


def check_bind_address(address: str, what: str = "--bind") -> None:
    if _bind_address(address):
        raise ProfileError(f"{what}: expected an IP address to listen on (e.g. 127.0.0.1 or 0.0.0.0), "
                           f"found {_describe(address)}")


def _variant(v: object) -> str | None:
    if v in VARIANTS or (isinstance(v, str) and (CPU_INSTANCES_VARIANT.match(v) or SCALE_OUT_VARIANT.match(v)
                                                  or TP_VARIANT.match(v))):
        return None
    return ("one of " + ", ".join(repr(c) for c in VARIANTS) + ", 'cpuK' (K CPU instances) or '1x*N' / 'cpu*N' "
            "(N embedded servers), or a served LLM's 'tpN' / '1*N'")


def _transport(v: object) -> str | None:
    """One of engine/transport_table.py's table as it is when read, or "auto" (the session picks one)."""
    if isinstance(v, str) and (v in TRANSPORTS or v == AUTO):
        return None
    return "one of " + ", ".join(repr(c) for c in TRANSPORTS) + f" or {AUTO!r} (picked for where the server runs)"


_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # RFC 9110 token


def _headers(v: object) -> str | None:
    """HTTP header names and values: a CR/LF in a value would inject headers of its own."""
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        return "a table of header name = string value"
    for name, value in v.items():
        if not _HEADER_NAME.match(name):
            return "header names made of letters, digits and - (no spaces or control characters)"
        if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
            return f"header values without control characters (CR/LF); {name!r} has one"
    return None


def _level_number(key: str) -> bool:
    """A p99 gate's level: a number > 0 written as text ("64", "12.5")."""
    try:
        level = float(key)
    except (TypeError, ValueError):
        return False
    return math.isfinite(level) and level > 0


P99_TABLE = 'a table of level = milliseconds, e.g. { "64" = 250 }'


def _p99_levels(v: object) -> str | None:
    return None if isinstance(v, dict) and all(_level_number(k) for k in v) else P99_TABLE


# --------------------------------------------------------------------------- schema
# Each key is declared once, here: its type, bounds and words (engine/table_schema.py reads them).

MAX_SECONDS = 7 * 24 * 3600.0  # a week: longer than any run this tool makes
MAX_COUNT = 1_000_000_000
MAX_DATASET = 10**15  # samples per epoch: far past any real dataset, short of float trouble
_FINITE = sys.float_info.max  # an upper bound that only inf (and nan) fail: they pass "> 0" and fail much later

Text = Annotated[str, Meta(pattern=r"\S", description="a non-empty string")]
PositiveInt = Annotated[int, Meta(ge=1)]
NonNegativeInt = Annotated[int, Meta(ge=0)]
Count = Annotated[int, Meta(ge=1, le=MAX_COUNT)]
Windows = Annotated[int, Meta(ge=1, le=100_000)]
PositiveNumber = Annotated[float, Meta(gt=0, le=_FINITE)]
NonNegativeNumber = Annotated[float, Meta(ge=0, le=_FINITE)]
Seconds = Annotated[float, Meta(ge=0, le=MAX_SECONDS, extra={"unit": " s"})]
PositiveSeconds = Annotated[float, Meta(gt=0, le=MAX_SECONDS, extra={"unit": " s"})]
Interval = Annotated[float, Meta(gt=0, le=3600, extra={"unit": " s"})]
# $/hr of a box: a bound on believable prices is a Meta(le=...) or a Check added here, once
Price = Annotated[float, Meta(ge=0, le=_FINITE)]
HttpUrl = Annotated[str, Check(_http_url)]
HttpUrls = Annotated[list[str], Check(_http_urls)]

Interconnect = Literal["none", "pcie_gen3", "pcie_gen4", "pcie_gen5", "nvlink", "sxm"]
INTERCONNECTS: tuple[str, ...] = typing.get_args(Interconnect)
ServerKind = Literal["embedded", "remote"]
Precision = Literal["fp32", "bf16", "fp16"]
Strategy = Literal["ddp", "fsdp"]
Scaling = Literal["weak", "strong"]


@dataclass
class Hardware:
    gpu_model: Text = "none"
    gpu_count: NonNegativeInt = 0
    vram_gb: NonNegativeNumber = 0.0
    interconnect: Interconnect = "none"
    vcpus: NonNegativeInt = 0
    ram_gb: NonNegativeNumber = 0.0
    cost_per_hour: Price = 0.0  # USD, what the box costs on demand


@dataclass
class Server:
    kind: ServerKind = "embedded"
    url: HttpUrl | None = None  # remote: http://host:8000
    metrics_url: HttpUrl | None = None  # remote: http://host:8002/metrics (optional)
    # remote, several servers at once (instead of url): each level's load spread over them
    urls: HttpUrls = field(default_factory=list)
    metrics_urls: HttpUrls = field(default_factory=list)  # one per URL of urls (optional)
    allow_mixed: bool = False  # several servers whose model configs differ: measured anyway
    headers: Annotated[dict[str, str], Check(_headers)] = field(default_factory=dict)  # e.g. auth; never recorded
    # user:password written in a URL: its host:port -> "Basic ..." (sent there only; never recorded)
    credentials: dict[str, str] = field(default_factory=dict, repr=False, metadata=NOT_A_KEY)
    startup_timeout_s: PositiveSeconds = 180.0
    bind_address: Annotated[str, Check(_bind_address)] = "127.0.0.1"  # embedded server; loopback unless asked
    # embedded server on GPUs: under a private MPS daemon ("auto": where the driver's
    # nvidia-cuda-mps-control is found; see engine/server/mps.py for what it gains)
    mps: Literal["auto", "on", "off"] = "auto"

    def endpoint_urls(self) -> list[str]:
        """The remote servers' HTTP URLs: urls, or url alone."""
        return list(self.urls) or ([self.url] if self.url else [])

    def endpoint_metrics_urls(self) -> list[str]:
        """Their /metrics URLs, one per server, or none."""
        return list(self.metrics_urls) or ([self.metrics_url] if self.metrics_url and not self.urls else [])


@dataclass
class Model:
    name: Text = "vit_tiny"
    # instance-group variant: 1x/2x/4x/8x over GPUs, cpu, cpuK, 1x*N, or auto
    variant: Annotated[str, Check(_variant)] = "auto"
    weights: Text | None = None  # path to OpenCLIP weights; None = random weights
    version: str = ""


@dataclass
class Load:
    mode: LoadMode = LoadMode.CONCURRENCY  # closed loop (concurrency) or open loop (rate)
    concurrency: Annotated[list[Annotated[int, Meta(ge=1, le=MAX_IN_FLIGHT)]], Meta(
        min_length=1, description=f"a non-empty list of integers from 1 to {MAX_IN_FLIGHT}",
    )] = field(default_factory=lambda: list(DEFAULT_CONCURRENCY))
    rates: Annotated[list[PositiveNumber], Meta(description="a list of request rates > 0")] = field(
        default_factory=list)  # requests/s, rate mode
    # rate mode: engine/load/arrivals.py ("trace": a Mooncake load.input_data's own gaps)
    arrival: Literal["constant", "poisson", "gamma", "trace"] = "constant"
    # arrival "gamma": the gaps' shape; below 1 bursty (1: Poisson), as vLLM's --burstiness
    burstiness: Annotated[float, Meta(gt=0, le=1000)] = 1.0
    batch_size: Count = 1
    window_ms: Annotated[int, Meta(ge=1, le=3_600_000, extra={"unit": " ms"})] = 5000  # perf_analyzer's default
    min_window_requests: Count = 50  # a window is extended until it holds this many
    stability_percent: PositiveNumber = 10.0
    stable_windows: Windows = 3
    max_windows: Windows = 10
    # a level is measured again, up to max_trials times in all and while trial_budget_s of the
    # sweep's re-measuring is left, when unstable, contended or out of line with the level before
    max_trials: Annotated[int, Meta(ge=1, le=100)] = 3
    trial_budget_s: Seconds = 120.0
    # others (neither ours nor the server's) taking more than this share of the usable cores in a
    # window mark its level contended (100: never)
    contended_percent: Annotated[float, Meta(gt=0, le=100, extra={"unit": " %"})] = 25.0
    warmup_s: Seconds = 2.0
    workers: Annotated[int, Meta(ge=0, le=4096)] = 0  # load worker processes; 0 = chosen automatically
    request_timeout_s: PositiveSeconds = 30.0
    data: Literal["random", "zeros"] = "random"
    # real inputs instead: a perf_analyzer input-data JSON file or folder (engine/triton/input_data.py)
    input_data: Annotated[str, Meta(description="a path to a JSON file or a folder")] = ""
    # synthetic prompts instead (a streaming model): words per prompt and output tokens asked per
    # request, each a mean with an optional spread, 128 or "128+-32": engine/triton/input_synthetic.py
    input_tokens: Annotated[str | int, Check(_token_count)] = ""
    output_tokens: Annotated[str | int, Check(_token_count)] = ""
    # OpenAI's synthetic prompts (engine/openai/workload.py): prefix_groups groups, each prompt opening
    # with its group's prefix of prefix_tokens words, then load.input_tokens words of its own; 0: none
    prefix_groups: Annotated[int, Meta(ge=0, le=4096)] = 0
    prefix_tokens: Annotated[int, Meta(ge=0, le=1 << 20)] = 0
    # distinct synthetic prompts an OpenAI sweep sends before it sends one again: each has its own
    # words, so a server's prefix cache finds nothing by accident until then
    distinct_prompts: Annotated[int, Meta(ge=1, le=65536)] = 2048
    # OpenAI's chat: turns per multi-turn session (engine/openai/sessions.py); 1: every request alone
    turns: Annotated[int, Meta(ge=1, le=1000)] = 1
    # concurrency mode: each user's think time between an answer and its next request (a session's
    # turns included); 0: at once
    think_time_s: Annotated[float, Meta(ge=0, le=3600, extra={"unit": " s"})] = 0.0
    # OpenAI's API: empty the server's prefix cache before each level, where it offers a way
    # (engine/openai/server_metrics.py's reset); "none": each level finds what the earlier left
    cache_reset: Literal["none", "each_level"] = "none"
    # a Mooncake trace as load.input_data (engine/openai/mooncake.py): words per hash id's block
    block_tokens: Annotated[int, Meta(ge=1, le=65536)] = 512
    # an integer output of a streaming model that carries each response's token count; "": a
    # response is one token
    tokens_from: str = ""
    # a sequence model (Triton's sequence batcher): steps per sequence, and how far a sequence's
    # length may stray from it either side, in percent (perf_analyzer's --sequence-length and
    # --sequence-length-variation); input data streams give their own lengths
    sequence_length: Count = 20
    sequence_length_variation: Annotated[float, Meta(ge=0, le=100, extra={"unit": " %"})] = 20.0
    # float outputs against the data's validation_data: |got - expected| <= tol * (1 + |expected|)
    validate_tolerance: NonNegativeNumber = 1e-5
    on_level_failure: Literal["continue", "stop"] = "continue"
    # a streaming sweep's objectives, "ttft_p99=200ms,itl_p99=50ms" or a list of them (--set splits at
    # the commas): engine/analysis/stream_slo.py; "": none
    slo: Annotated[str | list[str], Check(_slo_text)] = ""
    server_wait_s: Seconds = 30.0  # after a level lost the server: how long to wait for it to return
    # UNIX seconds: the first level starts at this wall-clock instant, everything prepared before
    # (several load hosts started together, then `gpuscale-tui merge`); 0: at once
    start_at: Annotated[float, Meta(ge=0, extra={"unit": " s"})] = 0.0
    # shapes (batch excluded) for inputs with variable dims, e.g. { tokens = [128] }
    input_shapes: Annotated[dict[str, Annotated[list[PositiveInt], Meta(min_length=1)]], Meta(
        description="a table of input name = list of positive dimensions, e.g. { image = [3, 224, 224] }",
    )] = field(default_factory=dict)
    # how inputs reach the server: in the HTTP body, or in shared memory the server maps
    # (perf_analyzer's --shared-memory system|cuda; a server on this machine only); "auto": the
    # session picks for where the server runs (engine/transport_table.py's auto_transport)
    transport: Annotated[str, Check(_transport)] = DEFAULT_TRANSPORT  # a name in engine/transport_table.py
    # the server's inference API: Triton's KServe v2, or OpenAI's (/v1/chat/completions, /v1/completions:
    # engine/openai/); a --url whose path ends in /v1 picks "openai"
    api: Literal["triton", "openai"] = "triton"
    # OpenAI's API key: the environment variable that holds it, or a file whose first line it is (the
    # file wins); sent only to the server's own host:port, never recorded
    api_key_env: Annotated[str, Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                     description="an environment variable's name")] = "OPENAI_API_KEY"
    api_key_file: Annotated[str, Meta(description="a path to a file holding the API key")] = ""
    # OpenAI's API: ask for exactly load.output_tokens (ignore_eos and min_tokens beside max_tokens);
    # false for a server that refuses fields it does not know
    ignore_eos: bool = True
    # after the sweep, the same levels against the no-compute `wire` model with this model's bytes
    # per item: the request path's ceiling (`run --wire`; see engine/analysis/wire.py)
    wire_check: bool = False
    # developer settings (tests, A/B runs; never a measurement to report): engine/load/dev.py
    dev_open_burst: bool = False
    dev_stall_ms: Annotated[int, Meta(ge=0, le=19, extra={"unit": " ms"})] = 0
    dev_samples_dir: str = ""  # a folder: each level's latency samples (merged windows) written there


@dataclass
class Probe:
    enabled: bool = False
    models: Annotated[list[Text], Meta(min_length=1, description="a non-empty list of model names")] = field(
        default_factory=lambda: ["mlp_258k", "mlp_6.9m"])
    strategies: Annotated[list[Strategy], Meta(min_length=1, description="a non-empty list of 'ddp' or 'fsdp'")] = (
        field(default_factory=lambda: ["ddp"]))
    batch_sizes: Annotated[list[PositiveInt], Meta(min_length=1, description="a non-empty list of positive integers")] = (
        field(default_factory=lambda: [32]))
    world_sizes: Annotated[list[PositiveInt], Meta(min_length=1, description="a non-empty list of positive integers")] = (
        field(default_factory=lambda: [1, 2]))
    scaling: Annotated[list[Scaling], Meta(min_length=1, description="a non-empty list of 'weak' or 'strong'")] = field(
        default_factory=lambda: ["weak"])
    steps: Count = 30
    warmup_steps: Annotated[int, Meta(ge=0, le=MAX_COUNT)] = 5
    repeats: Windows = 3
    precision: Precision = "fp32"
    timeout_s: PositiveSeconds = 300.0
    allreduce: bool = True
    allreduce_max_bytes: PositiveInt = 1 << 30
    # samples per epoch: with hardware.cost_per_hour, the time and $ per epoch at each world size
    dataset_size: Annotated[int, Meta(ge=1, le=MAX_DATASET)] | None = None


@dataclass
class Telemetry:
    nvml_interval_s: Interval = 1.0
    host_interval_s: Interval = 1.0


@dataclass
class Gates:
    """Pass/fail thresholds turned into the exit code (CI use). Empty = no gate."""

    min_throughput: PositiveNumber | None = None  # inferences/s at the best level
    # level -> p99 limit
    max_p99_ms: Annotated[dict[str, PositiveNumber], Meta(description=P99_TABLE), Check(_p99_levels)] = field(
        default_factory=dict)
    min_efficiency: PositiveNumber | None = None  # scaling efficiency, compare mode


@dataclass
class Profile:
    name: Text = ""  # profile_from_dict: the file's name unless it says otherwise
    description: str = ""
    hardware: Hardware = field(default_factory=Hardware)
    server: Server = field(default_factory=Server)
    model: Model = field(default_factory=Model)
    load: Load = field(default_factory=Load)
    probe: Probe = field(default_factory=Probe)
    telemetry: Telemetry = field(default_factory=Telemetry)
    gates: Gates = field(default_factory=Gates)
    source: str = field(default="", metadata=NOT_A_KEY)  # the file it came from

    def to_dict(self, redact: bool = True) -> dict[str, Any]:
        # every key (asdict: msgspec.to_builtins leaves out defaults msgspec did not set), as
        # plain JSON values (to_builtins: the LoadMode as its string)
        data: dict[str, Any] = msgspec.to_builtins(dataclasses.asdict(self))
        if redact:
            data["server"] = redact_server(data["server"])
        return data


SECTIONS: dict[str, type] = table_schema.tables(Profile)  # "hardware" -> Hardware, ...


def recorded_profile(data: object) -> Profile:
    """A recording's copy of the profile (SessionStarted.profile, the meta table's), typed: a
    key it lacks (an older version) or holds of another type (a doctored file) keeps its default."""
    return table_schema.read_lenient(Profile, data)


def redact_url(url: str | None) -> str | None:
    """Drop user:password from a URL so it can be written anywhere."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return parts._replace(netloc=f"***@{host}").geturl()


def redact_server(server: dict[str, Any]) -> dict[str, Any]:
    out = dict(server)
    out["url"] = redact_url(out.get("url"))
    out["metrics_url"] = redact_url(out.get("metrics_url"))
    for key in ("urls", "metrics_urls"):
        if isinstance(out.get(key), list):
            out[key] = [redact_url(u) for u in out[key]]
    out["headers"] = {k: "***" for k in (out.get("headers") or {})}
    out.pop("credentials", None)
    return out


def authority(url: str) -> str:
    """A URL's host:port, lower-case, the port filled in from the scheme: whom a credential is for."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 0
    return f"{(parts.hostname or '').lower()}:{port}"


def profile_secrets(profile: Profile) -> list[str]:
    """What must never be shown or recorded: header values (auth) and URL passwords."""
    server = profile.server
    urls = (server.url, server.metrics_url, *server.urls, *server.metrics_urls)
    found = [*server.headers.values(), *server.credentials.values(), *(urlsplit(u).password if u else None for u in urls)]
    return [s for s in found if s]


def headers_for(server: Server, *urls: str | None) -> dict[str, str]:
    """The headers to send to ``urls`` (all of them alike): server.headers, and the Authorization
    of a user:password written in a URL only when every one of ``urls`` is that URL's host:port."""
    headers = dict(server.headers)
    given = {server.credentials.get(authority(u)) for u in urls if u}
    if len(given) == 1 and (auth := next(iter(given))) is not None:
        headers["Authorization"] = auth
    return headers


# --------------------------------------------------------------------------- validation


def _describe(v: object, key: str = "") -> str:
    """The found value for an error line, with credentials masked: errors go to the screen."""
    from engine.redact import MASK, Redactor

    leaf = key.rpartition(".")[2]
    if leaf == "headers" or ".headers." in f".{key}.":  # a header's value is a secret, whatever its name
        return f"a {type(v).__name__} (not shown: header values may be credentials)"
    if leaf in ("url", "metrics_url") and isinstance(v, (dict, list)):
        return f"a {'table' if isinstance(v, dict) else 'list'} (not shown: it may hold credentials)"
    if leaf in ("urls", "metrics_urls"):
        return f"a {type(v).__name__} (not shown: it may hold credentials)"
    if leaf in ("url", "metrics_url") and isinstance(v, str) and "@" in v:  # user info, however it is written
        v = f"{v.partition('://')[0] + '://' if '://' in v else ''}{MASK}@{v.rpartition('@')[2]}"
    text = repr(Redactor().value(v, leaf))
    return text if len(text) <= 60 else text[:57] + "..."


def unknown_key_error(source: str, key: str, known: list[str]) -> ProfileError:
    """The one line for a key no table declares, listing the keys its table knows."""
    return ProfileError(f"{source}: {key}: {unknown_key(key.rpartition('.')[2], known)}")


def _credentials_to_header(server: Server, fail: Callable[[str, str], ProfileError]) -> None:
    """``http://user:password@host``: sent as HTTP Basic auth (an Authorization header) to that
    host and port only (server.credentials, headers_for), the URL kept without them. A password
    written in metrics_url for one box never goes to another box's inference port."""
    found: dict[str, tuple[str, str]] = {}

    def strip(key: str, url: str) -> str:
        parts = urlsplit(url)
        if parts.username is None and parts.password is None:
            return url
        found[key] = (unquote(parts.username or ""), unquote(parts.password or ""))
        stripped = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        user, password = found[key]
        token = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        if server.credentials.setdefault(authority(stripped), token) != token:
            raise fail(f"server.{key}", "expected the same user:password as the other URLs of its host and port, "
                                        "found different ones")
        return stripped

    for key in ("url", "metrics_url"):
        url = getattr(server, key)
        if url:
            setattr(server, key, strip(key, url))
    for key in ("urls", "metrics_urls"):  # several servers: one user:password for them all
        setattr(server, key, [strip(f"{key}[{i}]", url) for i, url in enumerate(getattr(server, key))])
    if found and any(name.lower() == "authorization" for name in server.headers):
        raise fail("server.url", "expected credentials in the URL or in server.headers.Authorization, found both")


def profile_from_dict(data: dict[str, Any], source: str) -> Profile:
    """Validate a parsed TOML document and build a Profile. Raises ProfileError."""

    def fail(key: str, message: str) -> ProfileError:
        return ProfileError(f"{source}: {key}: {message}")

    named = {"name": Path(source).stem if source else "profile", **data}
    try:
        profile = table_schema.parse(Profile, named, source=source)
    except table_schema.UnknownKey as exc:
        raise unknown_key_error(source, exc.key, exc.known) from None
    except table_schema.Mismatch as exc:
        raise fail(exc.key, f"expected {exc.expected}, found {_describe(exc.found, exc.key)}") from None
    probe = data.get("probe")
    if not (isinstance(probe, dict) and "world_sizes" in probe) and profile.hardware.gpu_count:
        # default: 1, 2, 4, ... up to the GPUs the box has
        n = profile.hardware.gpu_count
        profile.probe.world_sizes = [w for w in (1, 2, 4, 8, 16, 32, 64) if w <= n] + ([n] if n & (n - 1) else [])
    _credentials_to_header(profile.server, fail)
    _check_consistency(profile, fail)
    return profile


def unknown_key(key: str, known: list[str]) -> str:
    """"unknown key (did you mean 'concurrency'?; known: ...)": developer keys (dev_*) work but
    are not offered."""
    shown = [k for k in known if not k.startswith("dev_")]
    match = closest(key, shown)
    return f"unknown key ({f'did you mean {match!r}?; ' if match else ''}known: {', '.join(shown)})"


def _check_endpoints(server: Server, fail: Callable[[str, str], ProfileError]) -> None:
    """server.urls: several servers, each once, instead of server.url; metrics URLs one per server."""
    if server.urls and server.url:
        raise fail("server.urls", "expected server.url (one server) or server.urls (several), found both")
    if server.metrics_urls and server.metrics_url:
        raise fail("server.metrics_urls", "expected server.metrics_url or server.metrics_urls, found both")
    if server.metrics_urls and len(server.metrics_urls) != len(server.urls):
        raise fail("server.metrics_urls", f"expected one per URL of server.urls ({len(server.urls)}), "
                   f"found {len(server.metrics_urls)}")
    for key in ("urls", "metrics_urls"):
        seen: dict[str, int] = {}
        for i, url in enumerate(getattr(server, key)):
            norm = url.rstrip("/").lower()
            if norm in seen:
                raise fail(f"server.{key}", f"endpoint ep{i + 1} ({redact_url(url)}) duplicates ep{seen[norm] + 1}: "
                           "each server once")
            seen[norm] = i


def _check_api(p: Profile, fail: Callable[[str, str], ProfileError]) -> None:
    """load.api and load.transport agree (http and auto stand for an API's default); the OpenAI
    API measures one server given by its URL."""
    spec = TRANSPORTS.get(p.load.transport)
    if p.load.api == OPENAI:
        if spec is not None and spec.api != OPENAI and p.load.transport != DEFAULT_TRANSPORT:
            offered = ", ".join(repr(t.name) for t in TRANSPORTS.values() if t.api == OPENAI)
            raise fail("load.transport", f"expected {offered} with load.api = 'openai', found {p.load.transport!r}")
        if p.server.kind != "remote" or len(p.server.endpoint_urls()) != 1:
            raise fail("load.api", "expected one server URL (server.kind = 'remote', server.url = http://HOST:PORT/v1) "
                       "with load.api = 'openai'")
    elif spec is not None and spec.api != TRITON:
        raise fail("load.transport", f"expected load.api = 'openai' for {p.load.transport!r} (an OpenAI transport), "
                   "found load.api = 'triton'")
    if p.load.think_time_s and p.load.mode != LoadMode.CONCURRENCY:
        raise fail("load.think_time_s", f"expected load.mode = 'concurrency' (users who think between requests), "
                   f"found load.mode = {str(p.load.mode)!r}")
    if p.load.burstiness != 1.0 and p.load.arrival != "gamma":
        raise fail("load.burstiness", f"expected load.arrival = 'gamma' for a burstiness, found load.arrival = "
                   f"{p.load.arrival!r}")
    if (p.load.prefix_groups > 0) != (p.load.prefix_tokens > 0):
        raise fail("load.prefix_groups", "expected load.prefix_groups and load.prefix_tokens both set (shared "
                   f"prefixes) or both 0, found {p.load.prefix_groups} and {p.load.prefix_tokens}")
    if p.load.arrival == "trace" and (p.load.api != OPENAI or not p.load.input_data):
        raise fail("load.arrival", "expected a trace as load.input_data (a Mooncake JSONL, load.api = 'openai') "
                   "for load.arrival = 'trace'")
    if p.load.cache_reset != "none" and p.load.api != OPENAI:
        raise fail("load.cache_reset", f"expected load.api = 'openai' (an LLM server's cache), found "
                   f"{p.load.cache_reset!r}")
    if p.load.turns > 1 and p.load.api != OPENAI:
        raise fail("load.turns", f"expected load.api = 'openai' for multi-turn sessions, found {p.load.turns}")
    if p.load.prefix_groups and p.load.api != OPENAI:
        raise fail("load.prefix_groups", "expected load.api = 'openai' for shared prefixes (Triton's synthetic prompts "
                   f"have none), found {p.load.prefix_groups}")
    if p.load.prefix_groups and p.load.input_data:
        raise fail("load.prefix_groups", "expected no shared prefixes beside load.input_data (the file's prompts are "
                   f"sent), found {p.load.prefix_groups}")


def _check_consistency(p: Profile, fail: Callable[[str, str], ProfileError]) -> None:
    """Rules between keys: contradictions a single key's check cannot see."""
    _check_endpoints(p.server, fail)
    if (problem := price_problem(p.hardware.cost_per_hour, p.hardware.gpu_count)) is not None:
        raise fail("hardware.cost_per_hour", f"expected {problem}, found {p.hardware.cost_per_hour!r}")
    if p.server.kind == "remote" and not p.server.endpoint_urls():
        raise fail("server.url", "expected an http:// URL when server.kind = 'remote', found nothing")
    if p.server.kind == "embedded" and p.server.endpoint_urls():
        raise fail("server.url", "expected no URL when server.kind = 'embedded' (set kind = 'remote')")
    if p.load.transport in TRANSPORTS and TRANSPORTS[p.load.transport].local_only and p.server.kind == "remote":
        remote = ", ".join(repr(t.name) for t in TRANSPORTS.values() if not t.local_only)
        raise fail("load.transport", f"expected {remote} with a remote server ({p.load.transport} needs the server on "
                   f"this machine), found {p.load.transport!r}")
    _check_api(p, fail)
    if p.load.mode == LoadMode.RATE and not p.load.rates:  # concurrency has a default list
        raise fail("load.rates", "expected a non-empty list of request rates when load.mode = 'rate', found []")
    longest_window_s = p.load.window_ms / 1000 + p.load.request_timeout_s  # a window stretches this far at most
    if p.load.mode == LoadMode.RATE and (slow := [r for r in p.load.rates if r * longest_window_s < 1]):
        raise fail("load.rates", f"expected rates of at least {1 / longest_window_s:.3g}/s (one request per "
                   f"measurement window of load.window_ms + load.request_timeout_s), found {slow[0]:g}/s")
    # (OpenAI's API sends load.output_tokens as each file prompt's max_tokens: only the prompt length conflicts)
    lengths = ("input_tokens",) if p.load.api == OPENAI else ("input_tokens", "output_tokens")
    synthetic = [k for k in lengths if getattr(p.load, k) != ""]
    if synthetic and p.load.input_data:
        raise fail(f"load.{synthetic[0]}", "expected no synthetic prompts beside load.input_data (the file's prompts "
                   f"are sent), found {getattr(p.load, synthetic[0])!r}")
    if p.load.stable_windows > p.load.max_windows:
        raise fail(
            "load.stable_windows",
            f"expected at most load.max_windows ({p.load.max_windows}), found {p.load.stable_windows}",
        )
    variant = p.model.variant
    if scale_out_parts(variant) and p.server.kind != "embedded":
        raise fail("model.variant", f"expected server.kind = 'embedded' for {variant!r} (several remote servers: "
                   "server.urls)")
    if variant.endswith("x") and p.hardware.gpu_count and int(variant[:-1]) > p.hardware.gpu_count:
        raise fail(
            "model.variant",
            f"expected at most hardware.gpu_count ({p.hardware.gpu_count}) GPUs, found {variant!r}",
        )
    if p.hardware.gpu_count and any(w > max(p.hardware.gpu_count, 1) for w in p.probe.world_sizes):
        raise fail(
            "probe.world_sizes",
            f"expected sizes up to hardware.gpu_count ({p.hardware.gpu_count}), found {p.probe.world_sizes}",
        )


# --------------------------------------------------------------------------- loading


def bundled_profiles() -> list[Path]:
    return sorted(PROFILES_DIR.glob("*.toml"))


def resolve_profile_path(name_or_path: str) -> Path:
    """A bundled name ("4x_rtx4080") or a path to a user's own TOML file."""
    candidate = Path(name_or_path).expanduser()
    if candidate.suffix == ".toml" or "/" in name_or_path:
        if candidate.is_dir():
            raise ProfileError(f"{name_or_path}: is a folder, not a profile file")
        if not candidate.is_file():
            raise ProfileError(f"{name_or_path}: no such profile file")
        return candidate
    bundled = PROFILES_DIR / f"{name_or_path}.toml"
    if bundled.is_file():
        return bundled
    names = [p.stem for p in bundled_profiles()]
    raise ProfileError(f"unknown profile {name_or_path!r}{did_you_mean(name_or_path, names)} (bundled: "
                       f"{', '.join(names)}; or give a path to a .toml file)")


def _parse_value(text: str) -> Any:
    """A --set value: any TOML value; "1,4,8" is a list; anything else a plain string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    if "," in text:
        return [_parse_value(part.strip()) for part in text.split(",") if part.strip()]
    return text


# server.url and server.urls are one setting (one server or several), as are their metrics URLs
ONE_OR_SEVERAL = {"url": "urls", "urls": "url", "metrics_url": "metrics_urls", "metrics_urls": "metrics_url"}


def apply_override(data: dict[str, Any], item: str) -> None:
    """Apply one ``section.key=value`` override (``--set``) to a parsed profile document."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ProfileError("--set: expected section.key=value, found an item without a key and '=' (not shown: "
                           "it may hold a credential)")
    *sections, leaf = key.split(".")
    node = data
    for section in sections:
        child = node.setdefault(section, {})
        if not isinstance(child, dict):
            raise ProfileError(f"--set {key}=...: {section!r} is not a table")
        node = child
    parsed = _parse_value(value.strip())
    if sections == ["server"] and leaf in ONE_OR_SEVERAL:  # one way of naming the servers replaces the other
        node.pop(ONE_OR_SEVERAL[leaf], None)
    if len(sections) == 1 and sections[0] in SECTIONS and not isinstance(parsed, list):
        if table_schema.is_list(SECTIONS[sections[0]], leaf):
            parsed = [parsed]  # --set load.concurrency=8 means [8]
    node[leaf] = parsed


def load_profile(name_or_path: str = DEFAULT_PROFILE, overrides: list[str] | tuple[str, ...] = ()) -> Profile:
    path = resolve_profile_path(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{_display_path(path)}: cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{_display_path(path)}: not valid TOML: {exc}") from None
    for item in overrides:
        apply_override(data, item)
    shown = _display_path(path)
    return profile_from_dict(data, f"{shown} with --set" if overrides else shown)


def _display_path(path: Path) -> str:
    """profiles/local.toml for bundled files; the user's own path as given otherwise."""
    try:
        return str(Path("profiles") / path.resolve().relative_to(PROFILES_DIR))  # a checkout or a wheel alike
    except ValueError:
        return str(path)
