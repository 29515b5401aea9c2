"""load.transport = auto: the pick for each situation (a pure function), the profile that accepts
it, the facts it is made from, and a real run on this box's embedded CPU server that picks before
the profile is recorded, says it in one warning and sends over the pick."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.profiles import ProfileError, load_profile
from engine.transport_pick import with_auto_transport
from engine.transport_table import EMBEDDED, LOCAL, REMOTE, TRANSPORTS, auto_transport

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("situation", "name", "words"), [
    ({"where": EMBEDDED, "model_on_gpus": True, "cuda_here": True}, "cuda_shm", "inputs wait in GPU memory"),
    ({"where": EMBEDDED, "model_on_gpus": True, "cuda_here": False}, "system_shm",
     "torch with CUDA is not importable here"),
    ({"where": EMBEDDED, "model_on_gpus": False, "cuda_here": True}, "system_shm", "with the model on its CPU"),
    ({"where": LOCAL, "model_on_gpus": False, "cuda_here": True}, "system_shm", "a server this tool did not start"),
    ({"where": REMOTE, "model_on_gpus": True, "cuda_here": True}, "http", "load from more hosts (--hosts N)"),
    ({"where": EMBEDDED, "model_on_gpus": True, "cuda_here": True, "hosts": 3}, "http", "from 3 hosts"),
    ({"where": EMBEDDED, "model_on_gpus": True, "cuda_here": True, "streams": True}, "grpc_stream", "streams"),
    ({"where": LOCAL, "linux": False}, "http", "no /dev/shm"),
])
def test_the_pick_for_each_situation(situation: dict[str, object], name: str, words: str) -> None:
    pick = auto_transport(**situation)  # type: ignore[arg-type]
    assert pick.name == name and pick.name in TRANSPORTS
    assert words in pick.why and pick.line == f"load.transport = auto: {name}, {pick.why}"


def test_the_profile_accepts_auto_and_keeps_http_as_the_default() -> None:
    assert load_profile("local").load.transport == "http"
    assert load_profile("local", ["load.transport=auto"]).load.transport == "auto"
    remote = load_profile("local", ["server.kind=remote", "server.url=http://10.0.0.5:8000", "load.transport=auto"])
    assert remote.load.transport == "auto"  # not refused as shared memory would be: the pick is http there
    with pytest.raises(ProfileError, match="or 'auto'"):
        load_profile("local", ["load.transport=shm"])


def _picked(overrides: list[str], gpus: int = 0, hosts: int = 1) -> tuple[str, str]:
    """The pick for a profile (the profile's transport after it) and its warning's text."""
    profile, pick = with_auto_transport(load_profile("local", ["load.transport=auto", *overrides]), lambda: gpus, hosts)
    assert pick is not None and profile.load.transport == pick.name
    return pick.name, pick.line


def test_the_pick_follows_where_the_server_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.triton.shm as shm

    def torch_asked() -> bool:
        raise AssertionError("torch looked up where it cannot decide")

    monkeypatch.setattr(shm, "torch_cuda_here", torch_asked)
    assert _picked(["model.name=identity"])[0] == "system_shm"  # a CPU config on this box
    assert _picked(["server.kind=remote", "server.url=http://10.0.0.5:8000"])[0] == "http"
    name, line = _picked(["server.kind=remote", "server.url=http://127.0.0.1:8000"])
    assert name == "system_shm" and "a server this tool did not start" in line
    assert _picked(["server.kind=remote", "server.url=http://localhost:8000"], hosts=2)[0] == "http"
    assert _picked(["model.name=toy_llm", "model.variant=1x"], gpus=1)[0] == "grpc_stream"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert _picked(["server.kind=remote", "server.url=http://127.0.0.1:8000"])[0] == "http"


@pytest.mark.parametrize(("cuda", "name"), [(True, "cuda_shm"), (False, "system_shm")])
def test_a_gpu_config_of_the_tools_own_server_takes_cuda_shm_where_torch_sees_cuda(
        monkeypatch: pytest.MonkeyPatch, cuda: bool, name: str) -> None:
    import engine.triton.shm as shm

    monkeypatch.setattr(shm, "torch_cuda_here", lambda: cuda)
    for variant in ("2x", "1x*2", "auto"):
        assert _picked(["model.name=openclip_vit_b32", f"model.variant={variant}"], gpus=2)[0] == name


def test_a_profile_not_asked_for_auto_is_left_as_it_is() -> None:
    def gpus() -> int:
        raise AssertionError("GPUs counted for a transport that was given")

    profile = load_profile("local", ["load.transport=grpc"])
    assert with_auto_transport(profile, gpus) == (profile, None)


@pytest.mark.server
@pytest.mark.xdist_group("cpu_study")
def test_a_run_with_auto_sends_over_the_pick_and_records_it(tmp_path: Path) -> None:
    from engine.record.reader import Recording

    run = subprocess.run(
        [sys.executable, "-m", "tui.cli", "--record", "--output", str(tmp_path), "--no-check",
         "--set", "model.name=identity", "--set", "load.transport=auto", "--set", "load.concurrency=2",
         "--set", "load.window_ms=300", "--set", "load.max_windows=3", "--set", "load.warmup_s=0.2",
         "--set", "load.max_trials=1", "--set", "load.contended_percent=100", "--set", "load.stability_percent=100"],
        cwd=REPO, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "load.transport = auto: system_shm, the server is on this machine with the model on its CPU" in run.stdout
    (path,) = tmp_path.glob("*.sqlite")
    with Recording.open(path) as recording:
        summary = recording.summary()
        assert summary.transport == "system_shm"
        assert [lv.result.requests > 0 and lv.result.errors == 0 for lv in summary.levels] == [True]
        warnings = [d["message"] for _s, _t, _k, d in recording.rows(kinds=("warning",))]
    assert any(m.startswith("load.transport = auto: system_shm") for m in warnings)  # the session's warning
