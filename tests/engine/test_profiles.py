"""Profile schema: every bundled profile validates; bad files fail with file, key, expected, found."""

from pathlib import Path

import pytest

from engine.profiles import (
    DEFAULT_CONCURRENCY,
    ProfileError,
    bundled_profiles,
    headers_for,
    load_profile,
    profile_from_dict,
    redact_url,
)

BUNDLED = {
    "local", "1x_rtx4080", "4x_rtx4080", "2x_rtx4070ti_super", "1x_a100", "4x_a100_sxm4",
    "8x_a100", "2x_h100_nvlink", "1x_h200", "2x_h200", "4x_h200",
}


def test_every_bundled_profile_is_present_and_valid():
    names = {p.stem for p in bundled_profiles()}
    assert BUNDLED <= names
    for path in bundled_profiles():
        profile = load_profile(str(path))
        assert profile.name == path.stem
        if profile.hardware.gpu_count:
            assert profile.model.variant == f"{profile.hardware.gpu_count}x"
            assert profile.hardware.cost_per_hour > 0
            assert max(profile.probe.world_sizes) <= profile.hardware.gpu_count


def test_local_is_the_embedded_default():
    profile = load_profile()
    assert profile.name == "local"
    assert profile.server.kind == "embedded"
    assert profile.load.concurrency == DEFAULT_CONCURRENCY


def test_user_profile_by_path_works_alike(tmp_path: Path):
    path = tmp_path / "mine.toml"
    path.write_text('[hardware]\ngpu_model = "L4"\ngpu_count = 1\ncost_per_hour = 0.8\n[model]\nvariant = "1x"\n')
    profile = load_profile(str(path))
    assert profile.name == "mine" and profile.hardware.gpu_model == "L4"


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


@pytest.mark.parametrize(
    "text, key, expected, found",
    [
        ("[load]\nconcurrency = [1, 0]\n", "load.concurrency", "list of integers from 1", "[1, 0]"),
        ("[load]\nconcurrency = [1000000]\n", "load.concurrency", "list of integers", "[1000000]"),
        ("[load]\nbatch_size = -3\n", "load.batch_size", "a positive integer", "-3"),
        ('[load]\nwindow_ms = "5s"\n', "load.window_ms", "a positive integer", "'5s'"),
        ('[hardware]\ninterconnect = "infiniband"\n', "hardware.interconnect", "one of", "'infiniband'"),
        ('[server]\nkind = "remote"\nurl = "ftp://x"\n', "server.url", "http:// or https:// URL", "'ftp://x'"),
        ('[server]\nkind = "remote"\nurl = "http://h:99999"\n', "server.url", "valid port", "'http://h:99999'"),
        ("[probe]\nrepeats = 0\n", "probe.repeats", "a positive integer", "0"),
        ("[probe]\ndataset_size = 0\n", "probe.dataset_size", "a positive integer", "0"),
        ("[probe]\ndataset_size = 1.5e6\n", "probe.dataset_size", "a positive integer", "1500000.0"),
        ('[load]\nmode = "burst"\n', "load.mode", "one of 'concurrency', 'rate'", "'burst'"),
        ("[load]\nrates = [-5]\n", "load.rates", "request rates > 0", "[-5]"),
        ("load = 3\n", "load", "a table [load]", "3"),
    ],
)
def test_bad_values_name_key_expected_and_found(tmp_path, text, key, expected, found):
    message = _error(tmp_path, text)
    assert f": {key}:" in message
    assert expected in message
    assert found in message


def test_unknown_keys_are_named(tmp_path):
    assert "load.concurency: unknown key" in _error(tmp_path, "[load]\nconcurency = [1]\n")
    assert "gpus: unknown key" in _error(tmp_path, "gpus = 4\n")


@pytest.mark.parametrize(
    "text, key",
    [
        ('[server]\nkind = "remote"\n', "server.url"),
        ('[server]\nurl = "http://h:8000"\n', "server.url"),
        ('[load]\nmode = "rate"\n', "load.rates"),
        ("[load]\nstable_windows = 5\nmax_windows = 3\n", "load.stable_windows"),
        ('[hardware]\ngpu_count = 2\n[model]\nvariant = "4x"\n', "model.variant"),
        ("[hardware]\ngpu_count = 2\n[probe]\nworld_sizes = [1, 2, 4]\n", "probe.world_sizes"),
    ],
)
def test_contradictions_between_keys(tmp_path, text, key):
    assert f": {key}:" in _error(tmp_path, text)


def test_not_toml_and_missing_files(tmp_path):
    assert "not valid TOML" in _error(tmp_path, "[load\n")
    with pytest.raises(ProfileError, match="no such profile file"):
        load_profile(str(tmp_path / "absent.toml"))
    with pytest.raises(ProfileError, match="unknown profile 'nope'.*bundled: .*local"):
        load_profile("nope")


def test_set_overrides_are_validated_like_the_file():
    profile = load_profile("local", ["load.concurrency=1,8", "load.window_ms=700", "model.name=identity"])
    assert profile.load.concurrency == [1, 8]
    assert profile.load.window_ms == 700
    assert profile.model.name == "identity"
    with pytest.raises(ProfileError, match="with --set: load.concurrency: expected"):
        load_profile("local", ["load.concurrency=0"])
    with pytest.raises(ProfileError, match="expected section.key=value"):
        load_profile("local", ["load.concurrency"])
    assert load_profile("local").probe.dataset_size is None  # not set: the bill asks for it
    assert load_profile("local", ["probe.dataset_size=1281167"]).probe.dataset_size == 1_281_167


def test_credentials_are_redacted_in_the_profile_dict():
    profile = profile_from_dict(
        {"server": {"kind": "remote", "url": "http://bob:s3cret@box:8000", "headers": {"X-Api-Key": "t0k3n"}}},
        "inline",
    )
    data = profile.to_dict()
    assert "s3cret" not in str(data) and "t0k3n" not in str(data)
    # URL credentials travel as HTTP Basic auth; the URL itself keeps none
    assert data["server"]["url"] == "http://box:8000"
    assert headers_for(profile.server, "http://box:8000/v2")["Authorization"] == "Basic Ym9iOnMzY3JldA=="
    assert "credentials" not in data["server"]
    assert redact_url("http://bob:s3cret@box:8000") == "http://***@box:8000"
    assert redact_url("http://box:8000") == "http://box:8000"


def test_a_credential_goes_only_to_the_host_and_port_it_was_written_for():
    """A password in metrics_url (box B) never goes with inference requests to box A, nor to a
    server given with --url over that profile."""
    server = profile_from_dict({"server": {"kind": "remote", "url": "http://a:8000",
                                           "metrics_url": "http://bob:pw@b:8002/metrics"}}, "inline").server
    assert "Authorization" not in headers_for(server, "http://a:8000")
    assert headers_for(server, "http://b:8002/metrics")["Authorization"] == "Basic Ym9iOnB3"
    assert "Authorization" not in headers_for(server, "http://B:8002", "http://c:8002")  # unless every URL is its place
    over = load_profile("local", ["server.kind=remote", "server.url=http://c:8000",
                                  "server.metrics_url=http://bob:pw@a:8002/metrics"]).server
    assert "Authorization" not in headers_for(over, *over.endpoint_urls())
    with pytest.raises(ProfileError, match="the same user:password as the other URLs of its host and port"):
        profile_from_dict({"server": {"kind": "remote", "url": "http://bob:pw@a:8000",
                                      "metrics_url": "http://eve:other@a:8000/metrics"}}, "inline")


def test_several_servers_in_server_urls():
    profile = profile_from_dict({"server": {"kind": "remote", "urls": ["http://bob:pw@a:8000", "http://bob:pw@b:8000"],
                                            "metrics_urls": ["http://a:8002/metrics", "http://b:8002/metrics"]}},
                                "inline")
    assert profile.server.endpoint_urls() == ["http://a:8000", "http://b:8000"]  # the credentials go in a header
    assert headers_for(profile.server, *profile.server.endpoint_urls())["Authorization"] == "Basic Ym9iOnB3"
    # ... to the host:port they were written for: not to the metrics ports, where none were written
    assert "Authorization" not in headers_for(profile.server, *profile.server.endpoint_metrics_urls())
    assert profile.server.endpoint_metrics_urls() == ["http://a:8002/metrics", "http://b:8002/metrics"]
    assert "pw" not in str(profile.to_dict())
    one = profile_from_dict({"server": {"kind": "remote", "url": "http://a:8000"}}, "inline")
    assert one.server.endpoint_urls() == ["http://a:8000"]


@pytest.mark.parametrize(("server", "key", "message"), [
    ({"kind": "remote", "url": "http://a:1", "urls": ["http://b:1", "http://c:1"]}, "server.urls",
     "expected server.url (one server) or server.urls (several), found both"),
    ({"kind": "remote", "urls": ["http://a:1", "http://b:1", "http://a:1"]}, "server.urls",
     "endpoint ep3 (http://a:1) duplicates ep1: each server once"),
    ({"kind": "remote", "urls": ["http://a:1", "http://b:1"], "metrics_urls": ["http://a:2/metrics"]},
     "server.metrics_urls", "expected one per URL of server.urls (2), found 1"),
    ({"kind": "embedded", "urls": ["http://a:1", "http://b:1"]}, "server.url", "expected no URL"),
    ({"kind": "remote", "urls": ["ftp://a", "http://b:1"]}, "server.urls", "expected a non-empty list of http://"),
    ({"kind": "remote", "urls": ["http://u:secret@a:1", 3]}, "server.urls", "not shown: it may hold credentials"),
])
def test_bad_server_urls_are_one_line(server, key, message):
    with pytest.raises(ProfileError) as err:
        profile_from_dict({"server": server}, "inline")
    text = str(err.value)
    assert text.startswith(f"inline: {key}: ") and message in text and "\n" not in text and "secret" not in text


def test_command_line_servers_replace_the_profiles():
    profile = load_profile("local", ["server.kind=remote", "server.url=http://a:8000",
                                     'server.urls=["http://b:8000", "http://c:8000"]'])
    assert profile.server.url is None and profile.server.endpoint_urls() == ["http://b:8000", "http://c:8000"]


@pytest.mark.parametrize("price", ["1e308", "1e-300", "-2", "nan"])
def test_a_price_no_gpu_hour_can_cost_is_refused_in_one_line(price):
    with pytest.raises(ProfileError, match="hardware.cost_per_hour: expected a") as info:
        load_profile("local", [f"hardware.cost_per_hour={price}"])
    assert "\n" not in str(info.value)
