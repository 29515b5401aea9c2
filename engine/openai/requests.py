"""The prompts an OpenAI sweep sends, and their HTTP requests, made once per sweep in the session.

Prompts: synthetic ones by default (engine/openai/workload.py: load.distinct_prompts of them,
load.input_tokens words, shared prefixes where asked, load.output_tokens as max_tokens), or load.input_data's ``.jsonl`` file: each non-empty line a JSON string (the
prompt) or an object with the prompt under ``text`` (or ``prompt``) and, optionally, its own
``max_tokens``. A bad line is one line naming the file and the line, before any load.

Output length: ``max_tokens`` (from load.output_tokens) with ``ignore_eos: true`` and ``min_tokens``
beside it (vLLM, SGLang, TensorRT-LLM's trtllm-serve read them; llama.cpp's server reads
ignore_eos and passes over the other): a server that ends early at EOS would make the length the
model's choice, not the plan's. load.ignore_eos = false leaves both out, for a server that refuses
fields it does not know. Streamed requests ask for ``stream_options: {"include_usage":
true}``: the server's token counts come in the last chunk.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from engine.errors import UserError
from engine.net.http1 import Endpoint, encode_request
from engine.openai.azure_trace import is_azure, read_azure
from engine.openai.mooncake import is_mooncake, read_mooncake
from engine.openai.workload import digest, synthetic_workload

MAX_PROMPTS_BYTES = 256 << 20  # a prompts file past this is refused
PROMPT_KEYS = ("text", "prompt")


@dataclass(frozen=True)
class Prompt:
    text: str
    max_tokens: int | None  # None: the server's default length

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass(frozen=True)
class Prompts:
    prompts: list[Prompt]
    label: str  # the recording's name for them: the file's path, or "synthetic (...)"
    sha256: str
    source: str  # "synthetic", "jsonl" or "mooncake"
    times: tuple[float, ...] = ()  # a trace's: each request's timestamp, seconds


def synthetic(input_tokens: object, output_tokens: object, count: int = 1, groups: int = 0,
              prefix_words: int = 0) -> Prompts:
    """``count`` distinct prompts, shared prefixes where asked (engine/openai/workload.py)."""
    made = synthetic_workload(input_tokens, output_tokens, count, groups, prefix_words)
    prompts = [Prompt(text, out) for text, out in zip(made.texts, made.max_tokens, strict=True)]
    return Prompts(prompts, made.label, digest(made), "synthetic")


def read_jsonl(path: str, output_tokens: object, block_words: int = 512) -> Prompts:
    """load.input_data's prompts, one per line; ``output_tokens`` (a mean, "" for none) sets
    max_tokens where a line does not. A Mooncake trace (engine/openai/mooncake.py) or an Azure
    trace's CSV (engine/openai/azure_trace.py) is told by its first line; Mooncake's hash ids
    become blocks of ``block_words`` words."""
    where = Path(path).expanduser()
    raw = _read_bounded(where, path)
    default = _mean(output_tokens)
    lines = raw.decode("utf-8", "replace").splitlines()
    first = next((line for line in lines if line.strip()), "")
    if is_mooncake(first) or is_azure(first):
        trace = read_mooncake(lines, path, block_words) if is_mooncake(first) else read_azure(lines, path)
        return Prompts([Prompt(r.text, r.max_tokens) for r in trace], path, hashlib.sha256(raw).hexdigest(),
                       "mooncake" if is_mooncake(first) else "azure", tuple(r.timestamp_ms / 1000 for r in trace))
    prompts = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            prompts.append(_prompt_of(line, number, path, default))
    if not prompts:
        raise UserError(f"input data {path}: no prompts (a JSON string, or an object with 'text', per line)")
    return Prompts(prompts, path, hashlib.sha256(raw).hexdigest(), "jsonl")


def _read_bounded(where: Path, path: str) -> bytes:
    try:
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a named pipe never blocks the run
    except OSError as exc:
        raise UserError(f"input data {path}: cannot read it: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise UserError(f"input data {path}: not a regular file (an OpenAI sweep reads a .jsonl file of prompts)")
        raw = f.read(MAX_PROMPTS_BYTES + 1)
    if len(raw) > MAX_PROMPTS_BYTES:
        raise UserError(f"input data {path}: over the {MAX_PROMPTS_BYTES >> 20} MiB limit for a prompts file")
    return raw


def _mean(output_tokens: object) -> int | None:
    from engine.profiles import token_count

    parsed = token_count(output_tokens) if output_tokens != "" else None
    return round(parsed.mean) if parsed is not None else None


def _prompt_of(line: str, number: int, path: str, default: int | None) -> Prompt:
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise UserError(f"input data {path}: line {number} is not JSON ({getattr(exc, 'msg', exc)})") from None
    if isinstance(value, str):
        return Prompt(value, default)
    if not isinstance(value, dict):
        raise UserError(f"input data {path}: line {number} is neither a string nor an object")
    keys = [k for k in PROMPT_KEYS if k in value]
    if not keys or not isinstance(value[keys[0]], str):
        raise UserError(f"input data {path}: line {number} has no prompt (a string under 'text' or 'prompt')")
    limit = value.get("max_tokens", default)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise UserError(f"input data {path}: line {number}: max_tokens is {str(limit)[:20]}, not a count of 1 or more")
    return Prompt(value[keys[0]], limit)


def body(model: str, prompt: Prompt, chat: bool, stream: bool, exact: bool = True) -> bytes:
    """One request's JSON body; ``exact``: ask for exactly max_tokens (load.ignore_eos)."""
    doc: dict[str, object] = {"model": model}
    if chat:
        doc["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        doc["prompt"] = prompt.text
    if prompt.max_tokens is not None:
        doc["max_tokens"] = prompt.max_tokens
        if exact:  # the plan's length, not the model's choice
            doc["ignore_eos"] = True
            doc["min_tokens"] = prompt.max_tokens
    if stream:
        doc["stream"] = True
        doc["stream_options"] = {"include_usage": True}
    return json.dumps(doc).encode()


def request_headers(stream: bool, key: str | None) -> dict[str, str]:
    """A completion request's headers; the key (if any) as a bearer token."""
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream" if stream else "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def http_request(endpoint: Endpoint, path: str, payload: bytes, stream: bool, key: str | None) -> bytes:
    """One whole HTTP/1.1 request; the key (if any) as a bearer token, to this endpoint only."""
    return encode_request("POST", endpoint, path, request_headers(stream, key), payload)
