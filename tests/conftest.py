"""Fixtures for every test folder: one real embedded Triton (identity model, CPU) for the whole
session. Tests that only need a server to talk to share it (start and graceful stop cost about
5 s); tests that stop, kill, freeze or reconfigure a server start their own."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def identity_server(tmp_path_factory):
    from engine.server.embedded import EmbeddedServer

    with EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path_factory.mktemp("triton-identity")) as srv:
        yield srv
