from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.record.naming import free_name, gpu_slug, new_file, recording_path, safe_output_path

WHEN = datetime(2026, 2, 15, 15, 30, 0, tzinfo=UTC)


def test_recording_name_follows_the_seeds(tmp_path: Path) -> None:
    path = recording_path(tmp_path, gpu_model="RTX 4080", gpu_count=4, profile_name="4x_rtx4080", when=WHEN)
    assert path == tmp_path / "rtx4080_4gpu_4x_rtx4080_20260215T153000Z.sqlite"


def test_time_is_converted_to_utc(tmp_path: Path) -> None:
    local = WHEN.astimezone(timezone(timedelta(hours=2)))
    path = recording_path(tmp_path, gpu_model="A100", gpu_count=1, profile_name="1x_a100", when=local)
    assert path.name == "a100_1gpu_1x_a100_20260215T153000Z.sqlite"


@pytest.mark.parametrize(
    ("model", "count", "slug"),
    [("NVIDIA GeForce RTX 4080", 4, "rtx4080"), ("NVIDIA H200", 8, "h200"), ("none", 0, "cpu"), ("A100", 0, "cpu")],
)
def test_gpu_slug(model: str, count: int, slug: str) -> None:
    assert gpu_slug(model, count) == slug


def test_profile_name_cannot_make_a_path(tmp_path: Path) -> None:
    path = recording_path(tmp_path, gpu_model="H200", gpu_count=2, profile_name="../../etc/passwd", when=WHEN)
    assert path.parent == tmp_path
    assert "/" not in path.name and ".." not in path.name


def test_taken_names_are_skipped(tmp_path: Path) -> None:
    first = recording_path(tmp_path, gpu_model="H200", gpu_count=2, profile_name="p", when=WHEN)
    first.write_bytes(b"x")
    second = recording_path(tmp_path, gpu_model="H200", gpu_count=2, profile_name="p", when=WHEN)
    assert second.name == first.stem + "_2.sqlite"
    # a leftover WAL of a crashed older file with that name would be read as ours: skip it too
    Path(f"{second}-wal").write_bytes(b"")
    third = recording_path(tmp_path, gpu_model="H200", gpu_count=2, profile_name="p", when=WHEN)
    assert third.name == first.stem + "_3.sqlite"


@pytest.mark.parametrize("name", ["../x.md", "/tmp/x.md", "a/../../x.md", "..", "", "C:\\x.md", "sub\\..\\..\\x"])
def test_output_names_cannot_escape(tmp_path: Path, name: str) -> None:
    with pytest.raises(UserError):
        safe_output_path(tmp_path / "out", name)


def test_output_name_through_a_link_cannot_escape(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(UserError, match="outside"):
        safe_output_path(out, "link/x.md")


def test_output_name_inside_is_accepted(tmp_path: Path) -> None:
    assert safe_output_path(tmp_path, "reports/a.md") == tmp_path.resolve() / "reports" / "a.md"


def test_new_file_never_replaces(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("precious")
    with pytest.raises(UserError, match="already exists"):
        with new_file(target) as fh:
            fh.write("new")
    assert target.read_text() == "precious"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]  # no temporary file left behind


def test_new_file_appears_only_when_complete(tmp_path: Path) -> None:
    target = tmp_path / "b.txt"
    with pytest.raises(RuntimeError):
        with new_file(target) as fh:
            fh.write("half")
            raise RuntimeError("writer failed")
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_free_name(tmp_path: Path) -> None:
    (tmp_path / "r.md").write_text("")
    assert free_name(tmp_path, "r", ".md") == tmp_path / "r_2.md"
