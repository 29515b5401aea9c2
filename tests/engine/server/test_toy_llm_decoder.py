"""toy_llm's torch decoder (its GPU variant's decode step), on CPU at small scale: a prompt's
tokens are the same alone and in a batch (the bench checks every answer against the answer given
alone), cache slots are given back, and the 1x variant serves it on a GPU."""

from __future__ import annotations

import importlib.util
import re
import sys
import types

import pytest

from engine.server.repository import EMBEDDED_ROOT, variant_files
from tests.lazy_modules import torch

if importlib.util.find_spec("torch") is None:
    pytest.skip("needs torch", allow_module_level=True)
pytestmark = pytest.mark.xdist_group("torch")  # imports torch: tests/conftest.py
PROMPTS = (b"Tell me a story about a lighthouse.", b"What is the capital of France?", b"Write a haiku.")


@pytest.fixture(scope="module")
def model():
    sys.modules.setdefault("triton_python_backend_utils", types.ModuleType("triton_python_backend_utils"))
    spec = importlib.util.spec_from_file_location("toy_llm_model", EMBEDDED_ROOT / "toy_llm" / "1" / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _decode(decoder, prompts, steps: int) -> list[list[int]]:
    slots = [decoder.take_slot() for _ in prompts]
    tokens = [[decoder.start(p)] for p in prompts]
    for step in range(steps):
        for seq, nxt in zip(tokens, decoder.step([t[-1] for t in tokens], slots, [step] * len(prompts)), strict=True):
            seq.append(nxt)
    for slot in slots:
        decoder.release(slot)
    return tokens


def test_a_prompts_tokens_do_not_depend_on_its_batch(model) -> None:
    decoder = model.TorchDecoder(torch.device("cpu"), 64, 2, 512, slots=8, context=4)
    alone = [_decode(decoder, [p], 6)[0] for p in PROMPTS]
    together = _decode(decoder, list(PROMPTS) * 2, 6)  # 6 at once; past the context of 4: a sliding window
    assert together == alone * 2
    assert len({tuple(t) for t in alone}) == len(PROMPTS)  # different prompts, different answers
    assert all(0 <= t < 512 for seq in alone for t in seq)


def test_cache_slots_are_given_back(model) -> None:
    decoder = model.TorchDecoder(torch.device("cpu"), 32, 1, 64, slots=2, context=4)
    taken = [decoder.take_slot(), decoder.take_slot()]
    assert decoder.take_slot() is None  # all taken: a newcomer waits for a later step
    decoder.release(taken[0])
    assert decoder.take_slot() == taken[0]


def test_the_1x_variant_runs_the_torch_decoder_on_a_gpu() -> None:
    files = variant_files(EMBEDDED_ROOT / "toy_llm")
    assert {"cpu", "1x"} <= set(files)
    text = files["1x"].read_text()
    assert "KIND_GPU" in text and re.search(r'key: "decoder" value: \{ string_value: "torch" \}', text)
    assert "torch" not in files["cpu"].read_text()
