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
