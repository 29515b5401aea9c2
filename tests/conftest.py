"""Fixtures for every test folder: one real embedded Triton (identity model, CPU) for the whole
session. Tests that only need a server to talk to share it (start and graceful stop cost about
5 s); tests that stop, kill, freeze or reconfigure a server start their own.

scripts/test.sh runs the suite on 2 pytest-xdist workers (--dist loadgroup); each worker is its
own session, with its own identity server. Tests that keep several cores busy for seconds (torch
ranks, torch export, the CPU study) carry xdist_group("cpu_heavy"): they run one after another
in one worker (the largest group is handed out first), never side by side, so they do not slow
each other down, and the study's latency figures are not taken next to 8 gloo ranks."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def identity_server(tmp_path_factory):
    from engine.server.embedded import EmbeddedServer

    with EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path_factory.mktemp("triton-identity")) as srv:
        yield srv


# Fixtures whose use means the test talks to a real tritonserver: such a test is a server test
# whether or not it says so (the fast lane, `scripts/test.sh --fast`, leaves them out).
SERVER_FIXTURES = frozenset({"identity_server", "identity_info"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)


@pytest.fixture(autouse=True)
def _fast_lane_starts_no_server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a run that leaves server tests out, a test that starts a tritonserver in this process
    is missing its `server` mark: it fails and says so, so the fast lane stays fast and honest."""
    if "not server" not in (request.config.option.markexpr or ""):
        return
    from engine.server.embedded import EmbeddedServer

    def refuse(self: EmbeddedServer) -> EmbeddedServer:
        raise AssertionError(f"{request.node.nodeid} starts a real tritonserver: mark it @pytest.mark.server")

    monkeypatch.setattr(EmbeddedServer, "start", refuse)
