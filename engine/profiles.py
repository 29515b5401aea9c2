"""Profiles: one TOML file describes a box, its server, its model and how to measure it.

The schema is declared once (the dataclasses below, with their ``_spec`` constraints) and every
error names the file, the key, what was expected and what was found, in one line.
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from engine.errors import UserError
from engine.modes import LoadMode
from engine.transports import DEFAULT_TRANSPORT, TRANSPORTS

PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"
DEFAULT_PROFILE = "local"
DEFAULT_CONCURRENCY = [1, 4, 8, 16, 32, 64, 128]
MAX_IN_FLIGHT = 4096  # per level; beyond this the client, not the server, is what you measure

INTERCONNECTS = ("none", "pcie_gen3", "pcie_gen4", "pcie_gen5", "nvlink", "sxm")
VARIANTS = ("auto", "cpu", "1x", "2x", "4x", "8x")
CPU_INSTANCES_VARIANT = re.compile(r"^cpu[1-9]\d*$")  # "cpu2": config.cpu2.pbtxt, 2 CPU instances
# scale-out: "1x*4" is 4 embedded servers of the 1x config, one per GPU; "cpu*2" 2 of the cpu config
SCALE_OUT_VARIANT = re.compile(r"^(1x|cpu(?:[1-9]\d*)?)\*([1-9]\d*)$")


def scale_out_parts(variant: str) -> tuple[str, int] | None:
    """"1x*4" -> ("1x", 4): the config each server runs and how many servers; None for a
    variant served by one server ("1x", "4x", "cpu2", "auto")."""
    match = SCALE_OUT_VARIANT.match(variant)
    return (match.group(1), int(match.group(2))) if match else None


class ProfileError(UserError):
    pass


# --------------------------------------------------------------------------- schema


@dataclass
class Hardware:
    gpu_model: str = "none"
    gpu_count: int = 0
    vram_gb: float = 0.0
    interconnect: str = "none"
    vcpus: int = 0
    ram_gb: float = 0.0
    cost_per_hour: float = 0.0  # USD, what the box costs on demand


@dataclass
class Server:
    kind: str = "embedded"  # "embedded" or "remote"
    url: str | None = None  # remote: http://host:8000
    metrics_url: str | None = None  # remote: http://host:8002/metrics (optional)
    # remote, several servers at once (instead of url): each level's load spread over them
    urls: list[str] = field(default_factory=list)
    metrics_urls: list[str] = field(default_factory=list)  # one per URL of urls (optional)
    allow_mixed: bool = False  # several servers whose model configs differ: measured anyway
    headers: dict[str, str] = field(default_factory=dict)  # e.g. auth; never recorded
    startup_timeout_s: float = 180.0
    bind_address: str = "127.0.0.1"  # embedded server; loopback unless asked
    # embedded server on GPUs: under a private MPS daemon ("auto": where the driver's
    # nvidia-cuda-mps-control is found; see engine/server/mps.py for what it gains)
    mps: str = "auto"  # "auto", "on" or "off"

    def endpoint_urls(self) -> list[str]:
        """The remote servers' HTTP URLs: urls, or url alone."""
        return list(self.urls) or ([self.url] if self.url else [])

    def endpoint_metrics_urls(self) -> list[str]:
        """Their /metrics URLs, one per server, or none."""
        return list(self.metrics_urls) or ([self.metrics_url] if self.metrics_url and not self.urls else [])


@dataclass
class Model:
    name: str = "vit_tiny"
    variant: str = "auto"  # instance-group variant: 1x/2x/4x/8x over GPUs, cpu, or auto
    weights: str | None = None  # path to OpenCLIP weights; None = random weights
    version: str = ""


@dataclass
class Load:
    mode: str = "concurrency"  # an engine.modes.LoadMode name: "concurrency" (closed loop) or "rate" (open loop)
    concurrency: list[int] = field(default_factory=lambda: list(DEFAULT_CONCURRENCY))
    rates: list[float] = field(default_factory=list)  # requests/s, rate mode
    arrival: str = "constant"  # rate mode: "constant" or "poisson"
    batch_size: int = 1
    window_ms: int = 5000  # perf_analyzer's default measurement interval
    min_window_requests: int = 50  # a window is extended until it holds this many
    stability_percent: float = 10.0
    stable_windows: int = 3
    max_windows: int = 10
    # a level is measured again, up to max_trials times in all and while trial_budget_s of the
    # sweep's re-measuring is left, when unstable, contended or out of line with the level before
    max_trials: int = 3
    trial_budget_s: float = 120.0
    # others (neither ours nor the server's) taking more than this share of the usable cores in a
    # window mark its level contended (100: never)
    contended_percent: float = 25.0
    warmup_s: float = 2.0
    workers: int = 0  # load worker processes; 0 = chosen automatically
    request_timeout_s: float = 30.0
    data: str = "random"  # "random" or "zeros"
    # real inputs instead: a perf_analyzer input-data JSON file or folder (engine/load/input_data.py)
    input_data: str = ""
    # float outputs against the data's validation_data: |got - expected| <= tol * (1 + |expected|)
    validate_tolerance: float = 1e-5
    on_level_failure: str = "continue"  # or "stop"
    server_wait_s: float = 30.0  # after a level lost the server: how long to wait for it to return
    # shapes (batch excluded) for inputs with variable dims, e.g. { tokens = [128] }
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    # how inputs reach the server: in the HTTP body, or in shared memory the server maps
    # (perf_analyzer's --shared-memory system|cuda; a server on this machine only)
    transport: str = DEFAULT_TRANSPORT  # a name in engine/transports.py's TRANSPORTS: "http", "system_shm", "cuda_shm"
    # after the sweep, the same levels against the no-compute `wire` model with this model's bytes
    # per item: the request path's ceiling (`run --wire`; see engine/analysis/wire.py)
    wire_check: bool = False
    # developer settings (tests, A/B runs; never a measurement to report): engine/load/dev.py
    dev_open_burst: bool = False
    dev_stall_ms: int = 0


@dataclass
class Probe:
    enabled: bool = False
    models: list[str] = field(default_factory=lambda: ["mlp_258k", "mlp_6.9m"])
    strategies: list[str] = field(default_factory=lambda: ["ddp"])
    batch_sizes: list[int] = field(default_factory=lambda: [32])
    world_sizes: list[int] = field(default_factory=lambda: [1, 2])
    scaling: list[str] = field(default_factory=lambda: ["weak"])
    steps: int = 30
    warmup_steps: int = 5
    repeats: int = 3
    precision: str = "fp32"  # "fp32", "bf16", "fp16"
    timeout_s: float = 300.0
    allreduce: bool = True
    allreduce_max_bytes: int = 1 << 30
    # samples per epoch: with hardware.cost_per_hour, the time and $ per epoch at each world size
    dataset_size: int | None = None


@dataclass
class Telemetry:
    nvml_interval_s: float = 1.0
    host_interval_s: float = 1.0


@dataclass
class Gates:
    """Pass/fail thresholds turned into the exit code (CI use). Empty = no gate."""

    min_throughput: float | None = None  # inferences/s at the best level
    max_p99_ms: dict[str, float] = field(default_factory=dict)  # level -> p99 limit
    min_efficiency: float | None = None  # scaling efficiency, compare mode


@dataclass
class Profile:
    name: str
    description: str = ""
    hardware: Hardware = field(default_factory=Hardware)
    server: Server = field(default_factory=Server)
    model: Model = field(default_factory=Model)
    load: Load = field(default_factory=Load)
    probe: Probe = field(default_factory=Probe)
    telemetry: Telemetry = field(default_factory=Telemetry)
    gates: Gates = field(default_factory=Gates)
    source: str = ""  # the file it came from

    def to_dict(self, redact: bool = True) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if redact:
            data["server"] = redact_server(data["server"])
        return data


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
    return out


# --------------------------------------------------------------------------- validation

Check = Callable[[Any], str | None]  # returns "expected ..." text when the value is wrong


def _positive_int(v: Any) -> str | None:
    return None if isinstance(v, int) and not isinstance(v, bool) and v > 0 else "a positive integer"


def _non_negative_int(v: Any) -> str | None:
    return None if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else "an integer >= 0"


def _number(v: Any) -> bool:
    """A real, finite number: inf/nan pass every comparison check and fail much later."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive_number(v: Any) -> str | None:
    return None if _number(v) and v > 0 else "a finite number > 0"


def _non_negative_number(v: Any) -> str | None:
    return None if _number(v) and v >= 0 else "a finite number >= 0"


def _at_most(check: Check, limit: float, unit: str = "") -> Check:
    """A bound on durations and counts: a window of 1e26 ms passes "> 0" and never ends."""

    def inner(v: Any) -> str | None:
        expected = check(v)
        if expected is None and v > limit:
            return f"a value up to {limit:.0f}{unit}"
        return expected

    return inner


MAX_SECONDS = 7 * 24 * 3600.0  # a week: longer than any run this tool makes
MAX_COUNT = 1_000_000_000
MAX_DATASET = 10**15  # samples per epoch: far past any real dataset, short of float trouble


def _bind_address(v: Any) -> str | None:
    if _string(v):
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


def _string(v: Any) -> str | None:
    return None if isinstance(v, str) and v.strip() else "a non-empty string"


def _bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else "true or false"


def _variant_check(v: Any) -> str | None:
    if v in VARIANTS or (isinstance(v, str) and (CPU_INSTANCES_VARIANT.match(v) or SCALE_OUT_VARIANT.match(v))):
        return None
    return ("one of " + ", ".join(repr(c) for c in VARIANTS) + ", 'cpuK' (K CPU instances) or '1x*N' / 'cpu*N' "
            "(N embedded servers)")


def _one_of(*choices: str) -> Check:
    def check(v: Any) -> str | None:
        return None if v in choices else "one of " + ", ".join(repr(c) for c in choices)

    return check


def _list_of(item: Check, what: str, non_empty: bool = True, items: tuple[str, ...] = ()) -> Check:
    def check(v: Any) -> str | None:
        expected = f"a {'non-empty ' if non_empty else ''}list of {what}"
        if not isinstance(v, list) or (non_empty and not v):
            return expected
        if any(item(x) for x in v):
            return expected
        return None

    return check


def _http_url(v: Any) -> str | None:
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


def _concurrency_level(v: Any) -> str | None:
    if _positive_int(v):
        return "a positive integer"
    return None if v <= MAX_IN_FLIGHT else f"at most {MAX_IN_FLIGHT} requests in flight"


def _str_dict(v: Any) -> str | None:
    ok = isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())
    return None if ok else "a table of string values"


_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # RFC 9110 token


def _headers(v: Any) -> str | None:
    """HTTP header names and values: a CR/LF in a value would inject headers of its own."""
    if _str_dict(v):
        return "a table of header name = string value"
    for name, value in v.items():
        if not _HEADER_NAME.match(name):
            return "header names made of letters, digits and - (no spaces or control characters)"
        if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
            return f"header values without control characters (CR/LF); {name!r} has one"
    return None


def _level_number(key: Any) -> bool:
    """A p99 gate's level: a number > 0 written as text ("64", "12.5")."""
    try:
        level = float(key)
    except (TypeError, ValueError):
        return False
    return math.isfinite(level) and level > 0


def _p99_table(v: Any) -> str | None:
    ok = isinstance(v, dict) and all(_number(x) and x > 0 and _level_number(k) for k, x in v.items())
    return None if ok else 'a table of level = milliseconds, e.g. { "64" = 250 }'



def _shape_table(v: Any) -> str | None:
    ok = isinstance(v, dict) and all(
        isinstance(dims, list) and dims and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)
        for dims in v.values()
    )
    return None if ok else "a table of input name = list of positive dimensions, e.g. { image = [3, 224, 224] }"


def _optional(check: Check) -> Check:
    def inner(v: Any) -> str | None:
        return None if v is None else check(v)

    return inner


def _power_of_two_sizes(v: Any) -> str | None:
    return _positive_int(v)


SPEC: dict[str, dict[str, Check]] = {
    "": {"name": _string, "description": lambda v: None if isinstance(v, str) else "a string"},
    "hardware": {
        "gpu_model": _string,
        "gpu_count": _non_negative_int,
        "vram_gb": _non_negative_number,
        "interconnect": _one_of(*INTERCONNECTS),
        "vcpus": _non_negative_int,
        "ram_gb": _non_negative_number,
        "cost_per_hour": _non_negative_number,
    },
    "server": {
        "kind": _one_of("embedded", "remote"),
        "url": _http_url,
        "metrics_url": _http_url,
        "urls": _list_of(_http_url, "http:// or https:// URLs"),
        "metrics_urls": _list_of(_http_url, "http:// or https:// URLs"),
        "allow_mixed": _bool,
        "headers": _headers,
        "startup_timeout_s": _at_most(_positive_number, MAX_SECONDS, " s"),
        "bind_address": _bind_address,
        "mps": _one_of("auto", "on", "off"),
    },
    "model": {
        "name": _string,
        "variant": _variant_check,
        "weights": _string,
        "version": lambda v: None if isinstance(v, str) else "a string",
    },
    "load": {
        "mode": _one_of(*(m.value for m in LoadMode)),
        "transport": lambda v: _one_of(*TRANSPORTS)(v),  # the table as it is when read
        "wire_check": _bool,
        "dev_open_burst": _bool,
        "dev_stall_ms": _at_most(_non_negative_int, 19, " ms"),
        "concurrency": _list_of(_concurrency_level, f"integers from 1 to {MAX_IN_FLIGHT}"),
        "rates": _list_of(_positive_number, "request rates > 0", non_empty=False),
        "arrival": _one_of("constant", "poisson"),
        "batch_size": _at_most(_positive_int, MAX_COUNT),
        "window_ms": _at_most(_positive_int, 3_600_000, " ms"),
        "min_window_requests": _at_most(_positive_int, MAX_COUNT),
        "stability_percent": _positive_number,
        "stable_windows": _at_most(_positive_int, 100_000),
        "max_windows": _at_most(_positive_int, 100_000),
        "max_trials": _at_most(_positive_int, 100),
        "trial_budget_s": _at_most(_non_negative_number, MAX_SECONDS, " s"),
        "contended_percent": _at_most(_positive_number, 100, " %"),
        "warmup_s": _at_most(_non_negative_number, MAX_SECONDS, " s"),
        "workers": _at_most(_non_negative_int, 4096),
        "request_timeout_s": _at_most(_positive_number, MAX_SECONDS, " s"),
        "data": _one_of("random", "zeros"),
        "input_data": lambda v: None if isinstance(v, str) else "a path to a JSON file or a folder",
        "validate_tolerance": _non_negative_number,
        "on_level_failure": _one_of("continue", "stop"),
        "input_shapes": _shape_table,
        "server_wait_s": _at_most(_non_negative_number, MAX_SECONDS, " s"),
    },
    "probe": {
        "enabled": _bool,
        "models": _list_of(_string, "model names"),
        "strategies": _list_of(_one_of("ddp", "fsdp"), "'ddp' or 'fsdp'"),
        "batch_sizes": _list_of(_positive_int, "positive integers"),
        "world_sizes": _list_of(_positive_int, "positive integers"),
        "scaling": _list_of(_one_of("weak", "strong"), "'weak' or 'strong'"),
        "steps": _at_most(_positive_int, MAX_COUNT),
        "warmup_steps": _at_most(_non_negative_int, MAX_COUNT),
        "repeats": _at_most(_positive_int, 100_000),
        "precision": _one_of("fp32", "bf16", "fp16"),
        "timeout_s": _at_most(_positive_number, MAX_SECONDS, " s"),
        "allreduce": _bool,
        "allreduce_max_bytes": _power_of_two_sizes,
        "dataset_size": _optional(_at_most(_positive_int, MAX_DATASET)),
    },
    "telemetry": {"nvml_interval_s": _at_most(_positive_number, 3600, " s"),
                  "host_interval_s": _at_most(_positive_number, 3600, " s")},
    "gates": {
        "min_throughput": _optional(_positive_number),
        "max_p99_ms": _p99_table,
        "min_efficiency": _optional(_positive_number),
    },
}

SECTIONS = {
    "hardware": Hardware,
    "server": Server,
    "model": Model,
    "load": Load,
    "probe": Probe,
    "telemetry": Telemetry,
    "gates": Gates,
}


def _describe(v: Any, key: str = "") -> str:
    """The found value for an error line, with credentials masked: errors go to the screen."""
    from engine.record.redact import MASK, Redactor

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


def _credentials_to_header(server: Server, fail: Callable[[str, str], ProfileError]) -> None:
    """``http://user:password@host``: sent as HTTP Basic auth (an Authorization header), the URL
    kept without them. Every request (inference, metadata, metrics) then carries them."""
    found: dict[str, tuple[str, str]] = {}

    def strip(key: str, url: str) -> str:
        parts = urlsplit(url)
        if parts.username is None and parts.password is None:
            return url
        found[key] = (unquote(parts.username or ""), unquote(parts.password or ""))
        return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()

    for key in ("url", "metrics_url"):
        url = getattr(server, key)
        if url:
            setattr(server, key, strip(key, url))
    for key in ("urls", "metrics_urls"):  # several servers: one user:password for them all
        setattr(server, key, [strip(f"{key}[{i}]", url) for i, url in enumerate(getattr(server, key))])
    if not found:
        return
    if len(set(found.values())) > 1:
        raise fail("server.metrics_url", "expected the same user:password as server.url (both go in one "
                                         "Authorization header), found different ones")
    if any(name.lower() == "authorization" for name in server.headers):
        raise fail("server.url", "expected credentials in the URL or in server.headers.Authorization, found both")
    user, password = next(iter(found.values()))
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    server.headers = {**server.headers, "Authorization": f"Basic {token}"}


def profile_from_dict(data: dict[str, Any], source: str) -> Profile:
    """Validate a parsed TOML document and build a Profile. Raises ProfileError."""

    def fail(key: str, message: str) -> ProfileError:
        return ProfileError(f"{source}: {key}: {message}")

    for key in data:
        if key not in SPEC[""] and key not in SECTIONS:
            known = ", ".join(sorted([*SPEC[""], *SECTIONS]))
            raise fail(key, f"unknown key (known: {known})")
    top: dict[str, Any] = {}
    for key, check in SPEC[""].items():
        if key in data:
            if (expected := check(data[key])) is not None:
                raise fail(key, f"expected {expected}, found {_describe(data[key], key)}")
            top[key] = data[key]
    if "name" not in top:
        top["name"] = Path(source).stem if source else "profile"
    sections: dict[str, Any] = {}
    for section, cls in SECTIONS.items():
        raw = data.get(section, {})
        if not isinstance(raw, dict):
            raise fail(section, f"expected a table [{section}], found {_describe(raw)}")
        values: dict[str, Any] = {}
        for key, value in raw.items():
            validator = SPEC[section].get(key)
            if validator is None:
                known = ", ".join(SPEC[section])
                raise fail(f"{section}.{key}", f"unknown key (known: {known})")
            if (expected := validator(value)) is not None:
                raise fail(f"{section}.{key}", f"expected {expected}, found {_describe(value, key)}")
            values[key] = value
        sections[section] = cls(**values)
    profile = Profile(**top, **sections, source=source)
    if "world_sizes" not in data.get("probe", {}) and profile.hardware.gpu_count:
        # default: 1, 2, 4, ... up to the GPUs the box has
        n = profile.hardware.gpu_count
        profile.probe.world_sizes = [w for w in (1, 2, 4, 8, 16, 32, 64) if w <= n] + ([n] if n & (n - 1) else [])
    _credentials_to_header(profile.server, fail)
    _check_consistency(profile, fail)
    return profile


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


def _check_consistency(p: Profile, fail: Callable[[str, str], ProfileError]) -> None:
    """Rules between keys: contradictions a single key's check cannot see."""
    _check_endpoints(p.server, fail)
    if p.server.kind == "remote" and not p.server.endpoint_urls():
        raise fail("server.url", "expected an http:// URL when server.kind = 'remote', found nothing")
    if p.server.kind == "embedded" and p.server.endpoint_urls():
        raise fail("server.url", "expected no URL when server.kind = 'embedded' (set kind = 'remote')")
    if TRANSPORTS[p.load.transport].local_only and p.server.kind == "remote":
        remote = ", ".join(repr(t.name) for t in TRANSPORTS.values() if not t.local_only)
        raise fail("load.transport", f"expected {remote} with a remote server ({p.load.transport} needs the server on "
                   f"this machine), found {p.load.transport!r}")
    if p.load.mode == LoadMode.RATE and not p.load.rates:  # concurrency has a default list
        raise fail("load.rates", "expected a non-empty list of request rates when load.mode = 'rate', found []")
    longest_window_s = p.load.window_ms / 1000 + p.load.request_timeout_s  # a window stretches this far at most
    if p.load.mode == LoadMode.RATE and (slow := [r for r in p.load.rates if r * longest_window_s < 1]):
        raise fail("load.rates", f"expected rates of at least {1 / longest_window_s:.3g}/s (one request per "
                   f"measurement window of load.window_ms + load.request_timeout_s), found {slow[0]:g}/s")
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
    names = ", ".join(p.stem for p in bundled_profiles())
    raise ProfileError(f"unknown profile {name_or_path!r} (bundled: {names}; or give a path to a .toml file)")


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
        fields = {f.name: f for f in dataclasses.fields(SECTIONS[sections[0]])}
        if leaf in fields and str(fields[leaf].type).startswith("list"):
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
        return str(path.resolve().relative_to(PROFILES_DIR.parent))
    except ValueError:
        return str(path)
