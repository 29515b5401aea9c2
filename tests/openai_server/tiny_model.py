"""A tiny llama-architecture GGUF model for the real OpenAI-compatible server the tests start
(llama.cpp's server through llama-cpp-python; docs/results/openai_server_choice.md says why).

Random weights (seeded), a tiny SentencePiece-style vocabulary (the three special tokens, the 256
byte tokens llama.cpp's SPM tokenizer falls back to, and a few hundred word pieces), 2 layers of
width 64: about 0.5 MB, written in well under a second with the `gguf` package. It is generated at
test time into a cache or tmp folder, never committed. Its output is random text, but every token
is a real one, sampled by llama.cpp: tokens, usage counts and stream chunks are the server's own.

    python -m tests.openai_server.tiny_model OUT.gguf
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODEL_NAME = "gpuscale-tiny-llama"
# The shape (kept tiny: the server loads it in well under a second on a 2-core box)
N_EMBD = 64
N_HEAD = 4
N_LAYER = 2
N_FF = 128
N_CTX = 2048
SEED = 56

# A small vocabulary: lowercase word pieces with SentencePiece's word-start marker, single letters
# and digits (so any ASCII text tokenizes without many byte fallbacks), and punctuation.
_WORDS = (
    "the of and to in is was for on that with as by at from it an be this are or have not but "
    "his they which one you had all were her can there their would been has more when if will no "
    "out so up said what its about into than them only other new some could time these two may "
    "first then do any like my now over such our man me even most made after also did many "
    "hello world tell story short long word token model server load test fast slow gpu cpu price "
    "request answer question stream chunk user system assistant please write count number"
).split()
# Ordinary tokens are ranked by score (SentencePiece's log-probabilities): longer pieces first.
_SPIECE = "\u2581"  # SentencePiece's word-start marker, which llama.cpp's SPM tokenizer uses for spaces


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types) in llama.cpp's SPM ("llama") tokenizer format."""
    from gguf import TokenType

    tokens: list[str] = ["<unk>", "<s>", "</s>"]
    types: list[int] = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]
    scores: list[float] = [0.0, 0.0, 0.0]
    for b in range(256):  # byte fallback: <0x00> .. <0xFF>
        tokens.append(f"<0x{b:02X}>")
        types.append(TokenType.BYTE)
        scores.append(0.0)
    pieces: list[str] = []
    for w in dict.fromkeys(_WORDS):
        pieces += [_SPIECE + w, w]
    pieces += [_SPIECE] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [str(d) for d in range(10)]
    pieces += list(".,!?;:'\"-()[]{}/<>=+*&%$#@_|")
    seen: set[str] = set(tokens)
    for p in pieces:
        if p in seen:
            continue
        seen.add(p)
        tokens.append(p)
        types.append(TokenType.NORMAL)
        scores.append(-float(len(scores)) / 1000.0 + len(p))  # longer pieces win merges
    return tokens, scores, types


# The chat template (Jinja, read by llama-cpp-python's server from the model's metadata): a plain
# one, so that a chat request's prompt is "role: content" lines.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def write(path: str | Path, embd: int = N_EMBD, layers: int = N_LAYER, ff: int = N_FF) -> Path:
    """Write the tiny model to `path` (atomically: a partly written file is never seen); a bench
    asks for a larger one (``embd``, ``layers``, ``ff``) so that the server, not the client, sets the pace."""
    import numpy as np

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    return write_llama(path, rand, name=MODEL_NAME, f16=False, ctx=N_CTX, embd=embd, layers=layers, ff=ff,
                       heads=N_HEAD)


def write_llama(path: Path, rand: Callable[[int, int], Any], *, name: str, f16: bool, ctx: int, embd: int,
                layers: int, ff: int, heads: int) -> Path:
    """A llama GGUF with this vocabulary and chat template, each weight matrix from ``rand(rows,
    cols)`` and the norms f32 ones, written atomically (the tests' tiny model and bench.llm_model's)."""
    import numpy as np
    from gguf import GGUFWriter, LlamaFileType

    tokens, scores, types = vocabulary()
    n_vocab = len(tokens)
    tmp = path.with_name(path.name + ".part")
    w = GGUFWriter(str(tmp), "llama")
    w.add_name(name)
    w.add_file_type(LlamaFileType.MOSTLY_F16 if f16 else LlamaFileType.ALL_F32)
    w.add_context_length(ctx)
    w.add_embedding_length(embd)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_rope_dimension_count(embd // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    ones = np.ones(embd, dtype=np.float32)  # norms stay f32, as llama.cpp's converters write them
    w.add_tensor("token_embd.weight", rand(n_vocab, embd))
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{part}.weight", rand(embd, embd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(ff, embd))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(ff, embd))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rand(embd, ff))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", rand(n_vocab, embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(path)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.openai_server.tiny_model OUT.gguf")
    print(write(sys.argv[1]))
