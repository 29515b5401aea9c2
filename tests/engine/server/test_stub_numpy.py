"""The embedded server refuses numpy 2 for its Python-backend stub (empty answers otherwise)."""

from __future__ import annotations

import sys

import pytest

from engine.server.distribution import numpy_refusal, stub_numpy_version


@pytest.mark.parametrize("version", ["2.0.2", "2.5.5", "3.0.0rc1"])
def test_numpy_2_is_refused_with_the_fix(version: str) -> None:
    line = numpy_refusal(version)
    assert line is not None and "\n" not in line
    assert version in line and "numpy<2" in line


@pytest.mark.parametrize("version", ["1.26.4", "1.24.0", None, "unknown"])
def test_numpy_1_or_unknown_is_not_refused(version: str | None) -> None:
    assert numpy_refusal(version) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the embedded server is Linux-only")
def test_the_stub_sees_this_environments_numpy() -> None:
    import numpy

    # this checkout's environment pins numpy<2 with the server extra: the stub must see the same
    assert stub_numpy_version() == numpy.__version__
