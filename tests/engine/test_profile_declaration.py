"""Every profile key is declared once, as a field of its table's dataclass: from there it is
validated, named in the unknown-key error, set by --set and read back typed from a recording.
A key added in that one place (a field of a subclass here) gets all of it with nothing else changed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import pytest
from msgspec import Meta

from engine import profiles, table_schema
from engine.events import SessionStarted
from engine.profiles import (
    Load,
    Profile,
    ProfileError,
    bundled_profiles,
    load_profile,
    profile_from_dict,
)
from engine.record.reader import Recording
from engine.record.recorder import Recorder


@dataclass
class LoadWithANewKey(Load):
    new_knob: Annotated[int, Meta(ge=1, le=64)] = 8  # the one place the new key is written


@dataclass
class ProfileWithANewKey(Profile):
    load: LoadWithANewKey = field(default_factory=LoadWithANewKey)  # type: ignore[assignment]  # a Load


@pytest.fixture
def new_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The profile as it would be with the field added to Load itself."""
    monkeypatch.setattr(profiles, "Profile", ProfileWithANewKey)
    monkeypatch.setattr(profiles, "SECTIONS", table_schema.tables(ProfileWithANewKey))


def _error(data: dict, source: str = "mine.toml") -> str:
    with pytest.raises(ProfileError) as info:
        profile_from_dict(data, source)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{source}: ")
    return message


def _through_a_recording(profile_dict: dict, tmp_path: Path) -> object:
    """The profile as a session records it (SessionStarted, credentials masked), read back."""
    path = tmp_path / "r.sqlite"
    recorder = Recorder(path)
    recorder(SessionStarted(session_id="s", profile_name="p", profile=profile_dict, mode="sweep"))
    recorder.close()
    with Recording.open(path) as recording:
        [started] = list(recording.events())
        assert isinstance(started, SessionStarted)
        assert recording.metadata["profile"] == started.profile
        return profiles.recorded_profile(started.profile)


def test_a_key_added_in_one_place_is_validated_listed_set_and_recorded(new_key, tmp_path):
    assert _error({"load": {"new_knob": 0}}) == "mine.toml: load.new_knob: expected a positive integer, found 0"
    assert "expected a value up to 64, found 65" in _error({"load": {"new_knob": 65}})
    assert "load.new_knob: expected a positive integer, found 'x'" in _error({"load": {"new_knob": "x"}})
    listed = _error({"load": {"new_knb": 3}})
    assert "load.new_knb: unknown key" in listed and "new_knob" in listed
    data: dict = {}
    profiles.apply_override(data, "load.new_knob=12")
    profile = profile_from_dict(data, "mine.toml")
    assert isinstance(profile, ProfileWithANewKey) and profile.load.new_knob == 12
    read = _through_a_recording(profile.to_dict(), tmp_path)
    assert isinstance(read, ProfileWithANewKey) and read.load.new_knob == 12


def _tables() -> list[tuple[str, type]]:
    return [("", Profile), *table_schema.tables(Profile).items()]


@pytest.mark.parametrize(("section", "table"), _tables(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_key_is_validated_and_listed(section, table):
    prefix = f"{section}." if section else ""
    for key in table_schema.keys(table):
        if section == "" and key in table_schema.tables(Profile):
            continue  # a sub-table: its own keys are checked below
        wrong = {"no": {"such": 1}}  # a table of tables: no key's type takes it
        doc = {section: {key: wrong}} if section else {key: wrong}
        assert f": {prefix}{key}: expected " in _error(doc), key
    unknown = {section: {"no_such_key": 1}} if section else {"no_such_key": 1}
    listed = _error(unknown)
    assert f"{prefix}no_such_key: unknown key (known: " in listed
    for key in table_schema.keys(table):  # the engine's own test switches (dev_*) work but are not offered
        assert (key in listed.partition("(known: ")[2]) != key.startswith("dev_"), key


@pytest.mark.parametrize("path", bundled_profiles(), ids=lambda p: p.stem)
def test_every_bundled_profile_reads_back_from_a_recording_as_loaded(path, tmp_path):
    profile = load_profile(str(path))
    recorded = profile.to_dict()
    assert json.loads(json.dumps(recorded)) == recorded  # plain JSON values
    read = _through_a_recording(recorded, tmp_path)
    assert isinstance(read, Profile)
    assert read.to_dict() == recorded  # every key, typed as declared (credentials masked both sides)
    assert read.load.mode is profile.load.mode  # the LoadMode, not its string


def test_a_doctored_recorded_key_reads_as_its_default():
    doctored = {"name": "p", "load": {"window_ms": "long", "warmup_s": float("inf"), "concurrency": [1, "x"]},
                "hardware": 7}
    read = profiles.recorded_profile(doctored)
    assert read.name == "p"
    assert (read.load.window_ms, read.load.warmup_s, read.load.concurrency) == (5000, 2.0, Load().concurrency)
    assert read.hardware == Profile().hardware
