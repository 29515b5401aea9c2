"""engine.errors.EXTRAS (what each feature imports, and the line naming its pip extra) agrees with
pyproject.toml's [project.optional-dependencies]; the core's dependencies need none of them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from engine.errors import EXTRAS, UserError, missing_extra, require_extra

PYPROJECT = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
OPTIONAL = PYPROJECT["project"]["optional-dependencies"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in requirements}


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_lists_the_distributions_its_feature_needs(extra: str) -> None:
    assert {dist for _module, dist in EXTRAS[extra]} <= _names(OPTIONAL[extra])


def test_the_core_needs_no_extra_and_all_holds_every_extra() -> None:
    core = _names(PYPROJECT["project"]["dependencies"])
    assert not core & {dist for deps in EXTRAS.values() for _m, dist in deps}
    assert OPTIONAL["all"] == [f"gpuscale-tui[{','.join(sorted(EXTRAS, key=list(OPTIONAL).index))}]"]


def test_the_full_setup_misses_no_extra() -> None:
    # scripts/setup.sh installs [all]: nothing is missing here
    assert [missing_extra(extra, extra) for extra in EXTRAS] == [None] * len(EXTRAS)


def test_a_missing_module_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EXTRAS, "probe", (("torch", "torch"), ("no_such_module_x", "scipy")))
    with pytest.raises(UserError, match=r"^the training probe needs scipy: pip install 'gpuscale-tui\[probe\]'$"):
        require_extra("probe", "the training probe")
