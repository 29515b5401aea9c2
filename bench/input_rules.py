"""The input-data files we run and perf_analyzer 2.41 refuses, each checked against its rule.

For each rule of engine/triton/input_json.PA_REFUSES (docs/input_data.md) a case on the embedded
``mixed`` model: the file we accept (the original) and the file the rule says it stands for (the
equivalent: floats written as floats, flat lists, each entry's ``shape`` given). perf_analyzer
runs on both: it must refuse the original (under every ``--shape`` that could serve it) and take
the equivalent. Our engine runs a short sweep on the original: no error, and the rule's warning
given. Two comparisons of requests: the HTTP requests our engine makes from the two files, byte
for byte; and the tensors perf_analyzer sent for the equivalent (read off the wire through a
loopback relay, bench/http_capture.py) against those of our requests for the original. One row
per case; exit 1 when any row is not as the rule says.

    python -m bench input_rules
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from bench.http_capture import Tensors
    from engine.triton.target import Target, TargetInfo

MODEL = "mixed"  # every datatype, a variable dimension (IDS), an optional FP32 input (EXTRA)


def _b64(raw: bytes) -> dict[str, str]:
    return {"b64": base64.b64encode(raw).decode()}


HALF = _b64(np.array([0.25, 0.5, 0.75, 1.0], "<f2").tobytes())
BRAIN = _b64((np.array([0.5, 1.0, 1.5, 2.0], "<f4").view("<u4") >> 16).astype("<u2").tobytes())  # exact in BF16


def _entry(ids: list[int], **inputs: Any) -> dict[str, Any]:
    """One entry of ``mixed`` that perf_analyzer 2.41 reads: FP16 and BF16 as b64 (it takes them
    no other way), IDS with its shape (its one variable dimension); ``inputs`` replace some."""
    entry: dict[str, Any] = {"IDS": {"content": ids, "shape": [len(ids)]}, "TEXT": ["a prompt"], "HALF": HALF,
                             "BRAIN": BRAIN, "PIXELS": [1, 2, 3], "EXTRA": [0.5, 1.5]}
    entry.update(inputs)
    return entry


@dataclass(frozen=True)
class Case:
    rule: str  # a key of engine/triton/input_json.PA_REFUSES
    what: str  # the row's name
    original_data: list[dict[str, Any]]  # the entries we accept under the rule
    equivalent_data: list[dict[str, Any]]  # the entries the rule says they stand for
    # perf_analyzer's flags for the original: each set is tried, and each must be refused
    pa_original_flags: tuple[tuple[str, ...], ...] = ((),)

    @property
    def original(self) -> dict[str, Any]:
        return {"data": self.original_data}

    @property
    def equivalent(self) -> dict[str, Any]:
        return {"data": self.equivalent_data}


CASES = (
    Case("int_literals", "integer literals for FP32 (EXTRA [1, 2])",
         [_entry([101, 7], EXTRA=[1, 2])], [_entry([101, 7], EXTRA=[1.0, 2.0])]),
    Case("nested", "nested list, FP32 (EXTRA [[1.5], [2.5]])",
         [_entry([101, 7], EXTRA=[[1.5], [2.5]])], [_entry([101, 7], EXTRA=[1.5, 2.5])]),
    Case("nested", "nested list, INT64 (IDS [[101, 7], [8, 9]])",
         [_entry([], IDS={"content": [[101, 7], [8, 9]], "shape": [4]})], [_entry([101, 7, 8, 9])]),
    Case("inferred_shape", "entries of 2 and 3 IDS, no shape",
         [_entry([], IDS=[101, 7]), _entry([], IDS=[101, 7, 8])], [_entry([101, 7]), _entry([101, 7, 8])],
         ((), ("--shape", "IDS:2"), ("--shape", "IDS:3"))),
)


def write_case(case: Case, folder: Path, index: int) -> tuple[Path, Path]:
    """The case's two files, written as json.dumps writes them (1.0 stays 1.0)."""
    original, equivalent = folder / f"{index}_{case.rule}_original.json", folder / f"{index}_{case.rule}_equivalent.json"
    original.write_text(json.dumps(case.original))
    equivalent.write_text(json.dumps(case.equivalent))
    return original, equivalent


def request_bytes(path: Path, target: Target, info: TargetInfo, batch: int = 1) -> tuple[tuple[bytes, ...], tuple[str, ...]]:
    """The very HTTP requests our engine sends for the file at ``path`` (its HTTP transport's
    prepared bytes), and the notes the reader gave. No server: the model comes as ``info``."""
    from engine.triton.input_data import read_input_data
    from engine.triton.request_set import data_requests
    from engine.triton.transports import SweepInputs
    from engine.triton.transports.http import HttpTransport

    data = read_input_data(str(path), info, target.input_shapes)
    requests = data_requests(target, info, batch, data)
    payload = HttpTransport().prepared(SweepInputs(target, info, batch, "random", ({}, [], []), requests=requests)).payload
    return payload.requests, data.notes


@dataclass
class Row:
    case: Case
    pa_original: str  # "refused: <its error line>" or what it did instead
    pa_equivalent: str
    ours_original: str
    same_requests: bool  # our requests from the original: the equivalent's, byte for byte
    same_as_perf_analyzer: bool  # the tensors perf_analyzer sent for the equivalent: ours for the original
    refused: bool
    taken: bool
    ours_ok: bool

    @property
    def as_rule_says(self) -> bool:
        return self.refused and self.taken and self.ours_ok and self.same_requests and self.same_as_perf_analyzer


def pa_on_file(pa: tuple[Path, dict[str, str]], url: str, data: Path, flags: tuple[str, ...] = (),
               capture: bool = False) -> tuple[bool, str, set[Tensors]]:
    """perf_analyzer on one file at concurrency 1: (it ran without an error, what it said, and
    with ``capture`` the distinct inference requests it sent, read off the wire through a relay)."""
    from bench.http_capture import Relay, infer_requests
    from bench.tools import pa_error_line

    binary, env = pa
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with Relay((host, int(port))) as relay:
        address = f"127.0.0.1:{relay.port}" if capture else f"{host}:{port}"
        cmd = [str(binary), "-m", MODEL, "-u", address, "--input-data", str(data),
               "--concurrency-range", "1", "--measurement-interval", "500", "-s", "90", "-r", "10", *flags]
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, check=False)
    sent = {request for record in relay.sent for request in infer_requests(bytes(record))}
    text = run.stdout + run.stderr
    # on a busy box its windows may disagree (exit 2, no figures): the requests went without error
    unstable = "Failed to obtain stable measurement" in text
    ok = "had error" not in text and "doesn't match" not in text and (run.returncode == 0 or unstable)
    error = pa_error_line(text).removeprefix("error: Failed to init manager inputs: ")
    return ok, ("ok" + (" (windows unstable, no error)" if unstable else "") if ok
                else f"refused (exit {run.returncode}): {error}"), sent


def _ours(target: Target, info: TargetInfo, data: Path) -> tuple[bool, str]:
    """A short sweep of our engine at concurrency 1 on the file: every request answered."""
    from engine.errors import UserError
    from engine.load.sweep import run_sweep
    from engine.profiles import Load
    from engine.triton.api import TritonApi

    load = Load(concurrency=[1], input_data=str(data), window_ms=500, stability_percent=90, warmup_s=0.5,
                max_windows=4)
    try:
        (result,) = asyncio.run(run_sweep(TritonApi(target, info), load, lambda e: None, asyncio.Event()))
    except UserError as exc:
        return False, f"refused: {exc}"
    ok = result.errors == 0 and result.throughput_rps > 0
    return ok, f"{'ok' if ok else 'failed'}: {result.status}, {result.errors} errors, {result.throughput_rps:.0f} req/s"


def check_case(case: Case, index: int, folder: Path, pa: tuple[Path, dict[str, str]], target: Target,
               info: TargetInfo) -> Row:
    from bench.http_capture import infer_requests
    from engine.triton.input_json import PA_REFUSES

    original, equivalent = write_case(case, folder, index)
    tried = [(flags, *pa_on_file(pa, target.http_url, original, flags)[:2]) for flags in case.pa_original_flags]
    pa_orig_ok = any(ok for _flags, ok, _said in tried)
    pa_orig = "; ".join((f"{' '.join(flags)}: " if flags else "") + said for flags, _ok, said in tried)
    pa_equiv_ok, pa_equiv, pa_sent = pa_on_file(pa, target.http_url, equivalent, capture=True)
    ours_ok, ours = _ours(target, info, original)
    ours_requests, notes = request_bytes(original, target, info)
    equivalent_requests, equivalent_notes = request_bytes(equivalent, target, info)
    warned = any(PA_REFUSES[case.rule] in note for note in notes)
    ours += ", warned" if warned else ", NOT warned"
    if equivalent_notes:  # the equivalent must be a file both tools take without a word
        pa_equiv += f"; our notes on it: {'; '.join(equivalent_notes)}"
    ours_sent = [request for raw in ours_requests for request in infer_requests(raw)]
    return Row(case, pa_orig, pa_equiv, ours, ours_requests == equivalent_requests,
               pa_sent == set(ours_sent) and len(ours_sent) == len(case.original_data), not pa_orig_ok, pa_equiv_ok,
               ours_ok and warned and not equivalent_notes)


def check_all(url: str, pa: tuple[Path, dict[str, str]], folder: Path) -> list[Row]:
    """Every case against the server at ``url`` (which serves ``mixed``), its files in ``folder``."""
    from engine.triton.target import Target, describe_target

    target = Target(url, MODEL)
    info = asyncio.run(describe_target(target))
    return [check_case(case, k, folder, pa, target, info) for k, case in enumerate(CASES)]


def table(rows: list[Row]) -> str:
    head = ("| rule | case | perf_analyzer, original | perf_analyzer, equivalent | ours, original | same requests: "
            "ours, original = equivalent (bytes) | same requests: perf_analyzer's tensors, equivalent = ours, original |")
    lines = [head, "|" + "---|" * 7]
    for r in rows:
        lines.append(f"| {r.case.rule} | {r.case.what} | {r.pa_original} | {r.pa_equivalent} | {r.ours_original} | "
                     f"{'yes' if r.same_requests else 'NO'} | {'yes' if r.same_as_perf_analyzer else 'NO'} |")
    return "\n".join(lines)


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                   epilog="Fits: CPU here (the embedded mixed model), under a minute; perf_analyzer "
                                          "from .wheels/ (set up on first use).")


def run(args: argparse.Namespace) -> int:
    from bench.tools import SetupError, ensure_perf_analyzer
    from engine.server.embedded import EmbeddedServer

    try:
        pa = ensure_perf_analyzer()
    except SetupError as exc:
        print(f"input_rules: {exc}")
        return 2
    folder = Path(tempfile.mkdtemp(prefix="input_rules_"))
    with EmbeddedServer(model=MODEL, variant="cpu", log_dir=folder) as server:
        rows = check_all(server.http_url, pa, folder)
    print(table(rows))
    print(f"\nfiles: {folder}")
    bad = [r.case.what for r in rows if not r.as_rule_says]
    if bad:
        print(f"input_rules: not as the rule says: {'; '.join(bad)}")
        return 1
    print("input_rules: every rule as stated: perf_analyzer refuses the original and takes the equivalent; ours runs "
          "the original with its warning, and sends the equivalent's bytes and perf_analyzer's tensors")
    return 0
