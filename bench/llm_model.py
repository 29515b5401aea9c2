"""`python -m bench.llm_model OUT.gguf [--embd N --layers N --ff N --heads N]`: a random-weight
llama GGUF large enough that a GPU, not the client, sets the pace of llama-server (for the GPU-box
LLM runs, bench/device/llm_gpu_box.sh). The vocabulary, tokenizer and chat template are the tests'
tiny model's (tests/openai_server/tiny_model.py), so prompts tokenize the same way (about 6 tokens a
word). Unlike that model: f16 weights, heads of 128 (a head size llama.cpp's CUDA flash attention
has kernels for), a context of 16,384, and weights scaled by 1/sqrt(fan-in) so activations stay
finite in f16 through many layers. The weights are views into one seeded pool of random numbers,
so a 1B-parameter file is written at disk speed (seconds), not at the random generator's.

The default shape: width 2048, 16 layers, FFN 5632, 16 heads: 0.82 B parameters, 1.65 GB.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

CTX = 16384
POOL = 1 << 24  # 16 M random numbers (32 MB in f16), every weight a window of it


def params(embd: int, layers: int, ff: int, n_vocab: int) -> int:
    return layers * (4 * embd * embd + 3 * embd * ff + 2 * embd) + 2 * n_vocab * embd + embd


def write(path: str | Path, embd: int = 2048, layers: int = 16, ff: int = 5632, heads: int = 16) -> Path:
    import numpy as np
    from gguf import GGUFWriter, LlamaFileType

    from tests.openai_server.tiny_model import CHAT_TEMPLATE, MODEL_NAME, vocabulary

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokens, scores, types = vocabulary()
    n_vocab = len(tokens)
    rng = np.random.default_rng(56)
    pool = rng.standard_normal(POOL, dtype=np.float32).astype(np.float16)
    offset = [0]

    def rand(rows: int, cols: int) -> np.ndarray:
        n = rows * cols
        reps = -(-n // POOL)
        src = pool if reps == 1 else np.tile(pool, reps)
        start = offset[0] % (POOL // 2) if reps == 1 and n <= POOL // 2 else 0
        offset[0] += 7919
        a = src[start:start + n].reshape(rows, cols)
        return (a * np.float16(1.0 / np.sqrt(cols))).astype(np.float16)

    tmp = path.with_name(path.name + ".part")
    w = GGUFWriter(str(tmp), "llama")
    w.add_name(MODEL_NAME + f"-{embd}x{layers}")
    w.add_file_type(LlamaFileType.MOSTLY_F16)
    w.add_context_length(CTX)
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
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{name}.weight", rand(embd, embd))
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


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.llm_model", description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--embd", type=int, default=2048)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--ff", type=int, default=5632)
    p.add_argument("--heads", type=int, default=16)
    a = p.parse_args(argv)
    t = time.monotonic()
    out = write(a.out, a.embd, a.layers, a.ff, a.heads)
    from tests.openai_server.tiny_model import vocabulary

    n = params(a.embd, a.layers, a.ff, len(vocabulary()[0]))
    print(f"{out}: {n / 1e9:.2f} B parameters, f16, {out.stat().st_size / 2**30:.2f} GiB, "
          f"width {a.embd}, {a.layers} layers, FFN {a.ff}, {a.heads} heads, in {time.monotonic() - t:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
