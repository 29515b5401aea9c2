"""The embedded ViT's batching machinery (model_repository/embedded/vit_batching.py) on CPU tensors:
bucket choice and padding, staging without concatenation, the runner's eager path and fallback."""

import pytest

from engine.server.repository import EMBEDDED_ROOT, REPOSITORY_ROOT
from tests.lazy_modules import LazyFile, torch

pytestmark = pytest.mark.xdist_group("torch")  # imports torch: tests/conftest.py

# both import torch: loaded by the first test that runs, not at collection
vb = LazyFile("vit_batching", EMBEDDED_ROOT / "vit_batching.py")
vit = LazyFile("vit", REPOSITORY_ROOT / "vit.py")


@pytest.mark.parametrize(
    "max_batch, expected",
    [(1, (1,)), (2, (1, 2)), (48, (1, 2, 4, 8, 16, 32, 48)), (128, (1, 2, 4, 8, 16, 32, 64, 128))],
)
def test_bucket_sizes_are_powers_of_two_then_the_maximum(max_batch, expected):
    assert vb.bucket_sizes(max_batch) == expected


def test_bucket_sizes_reject_a_batchless_model():
    with pytest.raises(ValueError, match="at least 1"):
        vb.bucket_sizes(0)


@pytest.mark.parametrize("n, bucket", [(1, 1), (2, 2), (3, 4), (17, 32), (33, 64), (64, 64), (65, 128), (128, 128)])
def test_choose_bucket_pads_to_the_next_bucket(n, bucket):
    assert vb.choose_bucket(n, vb.bucket_sizes(128)) == bucket


@pytest.mark.parametrize("n", [0, 129])
def test_choose_bucket_rejects_what_fits_nowhere(n):
    with pytest.raises(ValueError, match="fits no bucket"):
        vb.choose_bucket(n, vb.bucket_sizes(128))


def test_parse_buckets():
    assert vb.parse_buckets("", 16) == (1, 2, 4, 8, 16)
    assert vb.parse_buckets(" 8, 1,8 ", 16) == (1, 8, 16)  # the maximum is always a bucket
    with pytest.raises(ValueError, match="within 1..16"):
        vb.parse_buckets("4,32", 16)
    with pytest.raises(ValueError, match="integers"):
        vb.parse_buckets("4,x", 16)


@pytest.mark.parametrize(
    "on_host, sizes, runs",
    [
        ([True, True, True], [2, 1, 3], [(0, 6)]),  # all from the host: one copy per batch
        ([False, False], [2, 2], []),  # all on the GPU: no host-to-device copy
        ([True, False, True, True], [2, 1, 3, 1], [(0, 2), (3, 7)]),
        ([True, True, False], [0, 2, 1], [(0, 2)]),
    ],
)
def test_host_runs_merge_neighbouring_host_inputs(on_host, sizes, runs):
    assert vb.host_runs(on_host, sizes) == runs


@pytest.mark.slow
def test_stager_copies_each_input_once_into_consecutive_rows():
    stager = vb.Stager(8, (2, 3), torch.device("cpu"))
    stager.host[:8] = -1.0  # padding rows must stay as they were
    inputs = [torch.full((k, 2, 3), float(i)) for i, k in enumerate([2, 1, 3])]
    assert stager.stage(inputs) == 6
    torch.testing.assert_close(stager.device[:6], torch.cat(inputs))
    assert bool((stager.device[6:] == -1.0).all())
    assert stager.copies == {"host": 3, "h2d": 0, "d2d": 0}
    assert stager.device is stager.host  # on the CPU the model reads the host buffer itself


def test_stager_rejects_overflow_and_foreign_shapes():
    stager = vb.Stager(4, (2,), torch.device("cpu"))
    with pytest.raises(ValueError, match="exceeds the staging capacity 4"):
        stager.stage([torch.zeros(3, 2), torch.zeros(2, 2)])
    with pytest.raises(ValueError, match="expected"):
        stager.stage([torch.zeros(1, 3)])
    with pytest.raises(ValueError, match="expected"):
        stager.stage([torch.zeros(1, 2, dtype=torch.float16)])


@pytest.mark.slow
def test_runner_on_cpu_matches_the_model_per_request():
    model = vit.build_vit("vit_tiny")
    stager = vb.Stager(8, (3, 224, 224), torch.device("cpu"))
    runner = vb.Runner(model, stager, vb.bucket_sizes(8), torch.float32, mode="graph")
    assert runner.mode == "eager"  # graphs are a GPU feature: the CPU path stays plain
    runner.prepare()
    gen = torch.Generator().manual_seed(0)
    inputs = [torch.rand(k, 3, 224, 224, generator=gen) for k in (1, 2)]
    out = runner.run(stager.stage(inputs))
    assert out.shape == (3, 512) and out.dtype == torch.float32
    with torch.inference_mode():
        expected = torch.cat([model(x) for x in inputs])
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


def test_runner_rejects_unknown_modes_and_short_buckets():
    stager = vb.Stager(8, (2,), torch.device("cpu"))
    with pytest.raises(ValueError, match="runner must be one of"):
        vb.Runner(torch.nn.Identity(), stager, (8,), torch.float32, mode="tensorrt")
    with pytest.raises(ValueError, match="below the staging capacity"):
        vb.Runner(torch.nn.Identity(), stager, (1, 4), torch.float32)
