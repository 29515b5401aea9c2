"""Model repository variants: which config a run gets, and that the multi-GPU ones really spread."""

import re

import pytest

from engine.errors import UserError
from engine.server.repository import (
    EMBEDDED_ROOT,
    REPOSITORY_ROOT,
    choose_variant,
    companions,
    embedded_models,
    instance_gpus,
    prepare_repository,
    variant_files,
)


@pytest.mark.parametrize("root", [EMBEDDED_ROOT / "openclip_vit_b32", REPOSITORY_ROOT / "openclip_vit_b32"])
@pytest.mark.parametrize("n", [2, 4, 8])
def test_multigpu_variants_spread_over_n_gpus(root, n):
    text = (root / f"config.multigpu.{n}x.pbtxt").read_text()
    assert "KIND_GPU" in text
    assert instance_gpus(text) == tuple(range(n))
    assert re.search(r'name:\s*"openclip_vit_b32"', text)


def test_onnx_configs_are_for_onnxruntime_with_dynamic_batching():
    for path in (REPOSITORY_ROOT / "openclip_vit_b32").glob("config*.pbtxt"):
        text = path.read_text()
        assert 'platform: "onnxruntime_onnx"' in text
        assert "dynamic_batching" in text and "preferred_batch_size" in text
        assert "max_batch_size: 64" in text


def test_embedded_models_and_their_variants():
    assert {"identity", "vit_tiny", "openclip_vit_b32"} <= set(embedded_models())
    assert set(variant_files(EMBEDDED_ROOT / "openclip_vit_b32")) == {"cpu", "1x", "2x", "4x", "8x"}
    assert set(variant_files(EMBEDDED_ROOT / "identity")) == {"cpu", "cpu2"}  # cpu2: 2 CPU instances
    assert set(variant_files(EMBEDDED_ROOT / "vit_tiny")) == {"cpu", "cpu2", "1x"}


def test_the_model_shape_models_are_cpu_models_without_study_variants():
    shapes = ("datacheck", "datacheck_nobatch", "datacheck_label", "datacheck_ensemble", "datacheck_bls", "mixed",
              "mixed_nobatch")
    assert set(shapes) <= set(embedded_models())
    for model in shapes:
        assert set(variant_files(EMBEDDED_ROOT / model)) == {"cpu"}, model


def test_companions_are_an_ensembles_steps_and_a_bls_models_calls():
    ensemble = (EMBEDDED_ROOT / "datacheck_ensemble" / "config.pbtxt").read_text()
    assert companions(ensemble) == ["datacheck", "datacheck_label"]
    assert companions((EMBEDDED_ROOT / "datacheck_bls" / "config.pbtxt").read_text()) == ["datacheck"]
    assert companions((EMBEDDED_ROOT / "identity" / "config.pbtxt").read_text()) == []
    # a model_name outside an ensemble (a parameter's text) is no step
    assert companions('backend: "python"\nparameters { key: "x" value: { string_value: "model_name: \\"y\\"" } }') == []


def test_prepare_brings_an_ensembles_steps_and_copies_shared_code_as_files(tmp_path):
    repo = tmp_path / "repo"
    prepared = prepare_repository("datacheck_ensemble", "auto", repo, gpu_count=0)
    assert prepared.variant == "cpu" and prepared.model == "datacheck_ensemble"
    assert sorted(p.name for p in repo.iterdir()) == ["datacheck", "datacheck_ensemble", "datacheck_label"]
    assert list((repo / "datacheck_ensemble" / "1").iterdir()) == []  # the server runs the steps: no code
    prepare_repository("datacheck_nobatch", "auto", repo, gpu_count=0)
    code = repo / "datacheck_nobatch" / "1" / "model.py"
    assert not code.is_symlink() and code.read_bytes() == (repo / "datacheck" / "1" / "model.py").read_bytes()
    prepare_repository("datacheck_bls", "auto", repo, gpu_count=0)  # its callee is there already: kept
    assert (repo / "datacheck_bls" / "1" / "model.py").is_file()


@pytest.mark.parametrize(
    "requested, gpus, expected",
    [("auto", 0, "cpu"), ("auto", 1, "1x"), ("auto", 3, "2x"), ("auto", 4, "4x"), ("auto", 16, "8x"),
     ("2x", 4, "2x"), ("cpu", 4, "cpu")],
)
def test_choose_variant(requested, gpus, expected):
    available = variant_files(EMBEDDED_ROOT / "openclip_vit_b32")
    assert choose_variant(requested, available, gpus, "openclip_vit_b32") == expected


def test_variant_errors_are_clear():
    available = variant_files(EMBEDDED_ROOT / "openclip_vit_b32")
    with pytest.raises(UserError, match="variant 4x needs 4 GPUs; this machine has 2"):
        choose_variant("4x", available, 2, "openclip_vit_b32")
    with pytest.raises(UserError, match="no 2x variant"):
        choose_variant("2x", variant_files(EMBEDDED_ROOT / "identity"), 2, "identity")


def test_prepare_copies_one_model_with_the_chosen_config(tmp_path):
    prepared = prepare_repository("vit_tiny", "auto", tmp_path / "repo", gpu_count=0)
    assert prepared.variant == "cpu" and prepared.gpus == ()
    model_dir = tmp_path / "repo" / "vit_tiny"
    assert "KIND_CPU" in (model_dir / "config.pbtxt").read_text()
    assert {p.name for p in (model_dir / "1").iterdir()} == {"model.py", "vit.py", "vit_batching.py", "execute_clock.py"}
    with pytest.raises(UserError, match="unknown embedded model 'resnet'.*identity"):
        prepare_repository("resnet", "auto", tmp_path / "other")


@pytest.mark.xdist_group("torch")  # imports torch: tests/conftest.py
@pytest.mark.parametrize("model", ["openclip_vit_b32", "vit_tiny"])
def test_gpu_vit_configs_take_gpu_inputs_and_have_buckets_for_every_batch(model):
    import importlib.util

    spec = importlib.util.spec_from_file_location("vit_batching_cfg", EMBEDDED_ROOT / "vit_batching.py")
    vit_batching = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vit_batching)
    for variant, path in variant_files(EMBEDDED_ROOT / model).items():
        if variant.startswith("cpu"):  # cpu, cpu2 (the study's second CPU config)
            continue
        text = path.read_text()
        assert re.search(r'key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: \{ string_value: "no" \}', text), path
        assert re.search(r'key: "runner" value: \{ string_value: "graph" \}', text), path
        max_batch = int(re.search(r"max_batch_size:\s*(\d+)", text).group(1))
        preferred = [int(x) for x in re.search(r"preferred_batch_size:\s*\[([^\]]*)\]", text).group(1).split(",")]
        buckets = vit_batching.bucket_sizes(max_batch)
        assert all(vit_batching.choose_bucket(p, buckets) == p for p in preferred), "preferred sizes pad nothing"
