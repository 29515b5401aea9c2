"""A new user's first commands: `init` writes a profile `profiles --check` accepts, typos get a
"did you mean", --url errors name the flag, a session given only --url is named after its
server, and `server --ports default` takes Triton's ports (refused in one line when taken)."""

from __future__ import annotations

import argparse
import socket
import tomllib

import pytest

from engine.errors import UserError
from engine.profiles import load_profile
from engine.remote_name import server_name
from engine.server.embedded import _check_ports_free
from engine.suggest import did_you_mean
from tui.cli import build_parser, main
from tui.commands.ports import parse_ports
from tui.commands.remote import name_after_server


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_init_writes_a_commented_profile_that_profiles_check_accepts(tmp_path, capsys):
    path = tmp_path / "box.toml"
    assert main(["init", str(path), "--url", "http://gpu-box:8000", "--gpus", "4", "--gpu-model", "RTX 4080",
                 "--price", "1.2", "--model", "openclip_vit_b32"]) == 0
    text = path.read_text()
    assert text.count("\n#") >= 2 and "# USD for the whole box" in text  # commented for a person
    doc = tomllib.loads(text)
    assert doc["server"] == {"kind": "remote", "url": "http://gpu-box:8000", "metrics_url": "http://gpu-box:8002/metrics"}
    assert doc["hardware"] == {"gpu_model": "RTX 4080", "gpu_count": 4, "cost_per_hour": 1.2}
    capsys.readouterr()
    assert main(["profiles", "--check", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"{path}: ok (box)"
    profile = load_profile(str(path))
    assert profile.model.name == "openclip_vit_b32" and profile.server.kind == "remote"


def test_init_never_writes_over_a_file_and_refuses_a_bad_url(tmp_path, capsys):
    path = tmp_path / "box.toml"
    path.write_text("mine")
    assert main(["init", str(path)]) == 2
    assert "already exists" in _one_error(capsys) and path.read_text() == "mine"
    assert main(["init", str(tmp_path / "new.toml"), "--url", "ftp://x"]) == 2
    assert _one_error(capsys).startswith("gpuscale-tui: error: --url: expected an http:// or https:// URL")
    assert not (tmp_path / "new.toml").exists() and list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("args, hint", [
    (["--profile", "4x_rtx408", "--record"], "unknown profile '4x_rtx408' (did you mean '4x_rtx4080'?)"),
    (["--record", "--set", "load.concurency=1,8"], "load.concurency: unknown key (did you mean 'concurrency'?;"),
    (["--record", "--set", "lod.concurrency=1"], "lod: unknown key (did you mean 'load'?;"),
])
def test_a_typo_gets_did_you_mean(args, hint, tmp_path, capsys):
    assert main([*args, "--no-record", "--output", str(tmp_path)]) == 2
    assert hint in _one_error(capsys)


def test_unknown_key_lists_no_developer_key(tmp_path, capsys):
    assert main(["--record", "--no-record", "--set", "load.zzz=1"]) == 2
    line = _one_error(capsys)
    assert "window_ms" in line and "dev_" not in line and "did you mean" not in line


def test_nothing_close_gets_no_suggestion():
    assert did_you_mean("xyzzy", ["concurrency", "rates"]) == ""
    assert did_you_mean("rate", ["concurrency", "rates"]) == " (did you mean 'rates'?)"


@pytest.mark.parametrize("flag", ["--url", "--metrics-url"])
def test_a_bad_url_flag_is_named_as_the_flag_not_as_a_profile_file(flag, capsys):
    args = ["--record", "--no-record", flag, "not a url"]
    if flag == "--metrics-url":
        args += ["--url", "http://127.0.0.1:9"]
    assert main(args) == 2
    line = _one_error(capsys)
    assert line.startswith(f"gpuscale-tui: error: {flag}: expected") and "local.toml" not in line, line


@pytest.mark.parametrize("urls, name", [
    (["http://gpu-box:8000"], "gpu-box"),
    (["http://10.0.0.5:9000/"], "10.0.0.5:9000"),
    (["https://a.example", "https://b.example", "https://c.example"], "a.example+2"),
    ([], "remote"),
])
def test_server_name(urls, name):
    assert server_name(urls) == name


def test_a_session_given_only_url_is_named_after_its_host_not_local():
    args = build_parser().parse_args(["--url", "http://gpu-box:8000", "--set", "model.name=m"])
    profile = name_after_server(load_profile("local", ["server.kind=remote", 'server.url="http://gpu-box:8000"']), args)
    assert profile.name == "gpu-box" and "gpu-box" in profile.description
    # a profile the user chose keeps its own name (it names the box)
    args = build_parser().parse_args(["--profile", "4x_rtx4080", "--url", "http://gpu-box:8000"])
    chosen = load_profile("4x_rtx4080", ["server.kind=remote", 'server.url="http://gpu-box:8000"'])
    assert name_after_server(chosen, args).name == "4x_rtx4080"


def test_server_ports_default_is_tritons_layout():
    assert build_parser().parse_args(["server", "--ports", "default"]).ports == (8000, 8001, 8002)
    assert parse_ports("9000, 9001, 9002") == (9000, 9001, 9002)
    for bad in ("8000,8001", "8000,8000,8002", "0,1,2", "a,b,c"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_ports(bad)


def test_server_ports_taken_is_one_line(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is taken"):
            _check_ports_free((port,), "127.0.0.1")
        assert main(["server", "--ports", "default", "--http-port", "9000"]) == 2
        assert "--ports and --http-port: give one of them" in _one_error(capsys)


def test_export_out_is_a_folder_and_a_file_name_is_refused_in_one_line(tmp_path, capsys):
    recording = tmp_path / "r.sqlite"
    recording.write_bytes(b"")
    assert main(["export", str(recording), "-f", "md", "--out", str(tmp_path / "x.md")]) == 2
    assert "--out " in (line := _one_error(capsys)) and "into a folder" in line
    assert not (tmp_path / "x.md").exists()
    (tmp_path / "afile").write_text("")
    assert main(["export", str(recording), "-f", "md", "--out", str(tmp_path / "afile")]) == 2
    assert "is a file" in _one_error(capsys)
