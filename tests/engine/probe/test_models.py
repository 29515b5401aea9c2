"""The probe's models: seed 002's exact parameter counts, the larger model, user factories."""

import pytest

from engine.errors import UserError
from tests.engine.probe.conftest import FIXTURES
from tests.lazy_modules import Lazy, torch

pytestmark = pytest.mark.xdist_group("torch")  # imports torch: tests/conftest.py

models = Lazy("engine.probe.models")  # torch: imported by the first test that runs, not at collection


def build_model(name: str):  # noqa: ANN201 - engine.probe.models' own
    return models.build_model(name)


def count_params(module) -> int:  # noqa: ANN001
    return models.count_params(module)


@pytest.mark.parametrize("name, params", [("mlp_258k", 258_432), ("mlp_6.9m", 6_885_376)])
def test_seed_002_parameter_counts(name, params):
    assert count_params(build_model(name).module) == params


def test_seed_mlps_have_the_seed_layers():
    linear = [m for m in build_model("mlp_6.9m").module if isinstance(m, torch.nn.Linear)]
    assert [m.out_features for m in linear] == [1024, 1024, 512, 512, 256, 768]
    drops = [m.p for m in build_model("mlp_258k").module if isinstance(m, torch.nn.Dropout)]
    assert drops == [0.2, 0.2, 0.2]


@pytest.mark.slow
def test_the_larger_model_is_larger_than_resnet50():
    assert count_params(build_model("transformer").module) > 25_600_000


def test_every_builtin_trains_one_step():
    names = sorted(set(models.BUILTIN) - {"transformer"})
    assert names
    for name in names:
        pm = build_model(name)
        x, y = pm.make_batch(4, torch.device("cpu"))
        loss = pm.loss_fn(pm.module(x), y)
        loss.backward()
        assert torch.isfinite(loss), name
        assert all(p.grad is not None for p in pm.module.parameters()), name


def test_user_factory_returning_a_module_with_probe_batch():
    pm = build_model(f"{FIXTURES}:regressor")
    x, y = pm.make_batch(3, torch.device("cpu"))
    assert x.shape == (3, 8) and y.dtype == torch.float32
    assert pm.loss_fn(pm.module(x), y).ndim == 0  # MSE for float targets


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("resnet9000", "unknown model 'resnet9000'"),
        ("no_such_module_xyz:make", "cannot import 'no_such_module_xyz'"),
        (f"{FIXTURES}:missing", "has no callable 'missing'"),
        (f"{FIXTURES}:not_a_model", "returned int"),
    ],
)
def test_bad_model_names_are_one_line_user_errors(name, fragment):
    with pytest.raises(UserError) as info:
        build_model(name)
    assert fragment in str(info.value) and "\n" not in str(info.value)
