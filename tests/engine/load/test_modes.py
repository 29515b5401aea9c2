"""Load modes: one strategy per typed name (engine/modes.py), read by the profile, the sweep and the reports."""

from __future__ import annotations

import dataclasses

import pytest

from engine.errors import UserError
from engine.load.workers_rule import workers_for_level
from engine.modes import CONCURRENCY, MODES, RATE, LoadMode, mode_of
from engine.profiles import Load, profile_from_dict


def test_every_mode_has_a_strategy_and_the_name_is_the_profile_string() -> None:
    assert set(MODES) == set(LoadMode)
    assert mode_of("concurrency") is CONCURRENCY and mode_of("rate") is RATE
    assert LoadMode.RATE == "rate"  # events and recordings keep the plain string
    assert mode_of(None) is CONCURRENCY and mode_of("no such mode") is CONCURRENCY  # older recordings
    load_fields = {f.name for f in dataclasses.fields(Load)}
    assert {m.levels_key for m in MODES.values()} <= load_fields


def test_levels_come_from_the_modes_profile_list() -> None:
    assert CONCURRENCY.levels(Load(mode="concurrency", concurrency=[1, 4])) == [1.0, 4.0]
    assert RATE.levels(Load(mode="rate", rates=[250, 12.5])) == [250, 12.5]


def test_workers_per_level() -> None:
    auto_c, auto_r = Load(mode="concurrency"), Load(mode="rate")
    assert [workers_for_level(auto_c, c, 8) for c in (1, 32, 33, 64, 1000)] == [1, 1, 2, 2, 8]
    assert [workers_for_level(auto_r, r, 8) for r in (10, 5000, 5001, 1e6)] == [1, 1, 2, 8]
    fixed_c, fixed_r = Load(mode="concurrency", workers=4), Load(mode="rate", workers=4)
    assert workers_for_level(fixed_c, 2, 4) == 2  # never more workers than requests in flight
    assert workers_for_level(fixed_r, 2, 4) == 4


@pytest.mark.parametrize("mode", ["concurrency", "rate", "bursty"])
def test_the_profile_accepts_exactly_the_mode_names(mode: str) -> None:
    data = {"name": "t", "load": {"mode": mode, "rates": [10.0]}}
    if mode in set(LoadMode):
        assert profile_from_dict(data, "test").load.mode == mode
    else:
        with pytest.raises(UserError, match="'concurrency', 'rate'"):
            profile_from_dict(data, "test")
