"""Developer settings (engine/load/dev.py): typed profile keys, off by default, each announced."""

from __future__ import annotations

import pytest

from engine.load.dev import LoadDev
from engine.profiles import Load, ProfileError, load_profile


def test_off_by_default_and_silent():
    dev = LoadDev.from_load(Load())
    assert dev == LoadDev() and dev.in_effect() == [] and dev.warning() is None


def test_each_setting_away_from_its_default_is_named_in_the_warning():
    profile = load_profile("local", ["load.dev_open_burst=true", "load.dev_stall_ms=15"])
    dev = LoadDev.from_load(profile.load)
    assert dev == LoadDev(open_burst=True, stall_ms=15)
    assert dev.warning() == ("developer settings in effect (load.dev_open_burst = true, load.dev_stall_ms = 15): "
                             "not a measurement to report")
    # recorded with the profile: the session's SessionStarted carries profile.to_dict()
    assert profile.to_dict()["load"]["dev_stall_ms"] == 15


@pytest.mark.parametrize("item", ["load.dev_stall_ms=25", "load.dev_open_burst=3"])
def test_a_bad_value_is_one_clear_line(item: str):
    with pytest.raises(ProfileError, match=item.split("=")[0]):
        load_profile("local", [item])
