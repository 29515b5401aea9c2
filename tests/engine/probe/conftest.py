import psutil
import pytest

# user models for the tests, as a user names them (the repo root is on the ranks' PYTHONPATH)
FIXTURES = "tests.engine.probe.probe_fixture_models"


def probe_children() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "engine.probe.rank_fork" in " ".join(child.cmdline()):  # the fork server and its ranks
                found.append(child)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def no_ranks_left():
    """Fails the test if any rank process outlives it."""
    assert probe_children() == []
    yield
    left = probe_children()
    for p in left:  # do not leak them into other tests, but report
        p.kill()
    assert left == [], f"rank processes left behind: {[p.pid for p in left]}"
