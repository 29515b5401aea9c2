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

    from tests.openai_server.tiny_model import MODEL_NAME, write_llama

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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

    return write_llama(path, rand, name=MODEL_NAME + f"-{embd}x{layers}", f16=True, ctx=CTX, embd=embd,
                       layers=layers, ff=ff, heads=heads)


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
