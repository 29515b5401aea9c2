"""File names: where a recording or an export goes, never over an existing file, never outside
the folder the user chose."""

from __future__ import annotations

import errno
import os
import re
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from engine.errors import UserError

RECORDING_SUFFIX = ".sqlite"
# Vendor words that make names long without telling GPUs apart ("NVIDIA GeForce RTX 4080").
_VENDOR_WORDS = re.compile(r"\b(nvidia|geforce|tesla|quadro)\b", re.IGNORECASE)
_MAX_TRIES = 1000


def gpu_slug(gpu_model: str, gpu_count: int) -> str:
    """"RTX 4080" -> "rtx4080"; no GPU -> "cpu" (as the seeds name their results)."""
    slug = re.sub(r"[^a-z0-9]", "", _VENDOR_WORDS.sub("", gpu_model).lower())
    if gpu_count <= 0 or slug in ("", "none", "cpu"):
        return "cpu"
    return slug


def name_slug(text: str) -> str:
    """A profile name made safe for a file name: letters, digits, '-' and '_' only."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_-")
    return slug[:64] or "profile"


def utc_stamp(when: datetime) -> str:
    """20260215T153000Z. A naive datetime is taken as UTC already."""
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y%m%dT%H%M%SZ")


def _taken(path: Path) -> bool:
    # A leftover -wal/-shm of an older file with this name would be read as part of ours.
    return any(Path(f"{path}{extra}").exists() for extra in ("", "-wal", "-shm", "-journal"))


def recording_path(out_dir: Path, *, gpu_model: str, gpu_count: int, profile_name: str, when: datetime) -> Path:
    """recordings/rtx4080_4gpu_4x_rtx4080_20260215T153000Z.sqlite, or ..._2.sqlite when that
    name is taken (two sessions started in the same second). Never an existing file."""
    stem = f"{gpu_slug(gpu_model, gpu_count)}_{max(gpu_count, 0)}gpu_{name_slug(profile_name)}_{utc_stamp(when)}"
    out_dir = Path(out_dir)
    for n in range(1, _MAX_TRIES + 1):
        path = out_dir / (f"{stem}{RECORDING_SUFFIX}" if n == 1 else f"{stem}_{n}{RECORDING_SUFFIX}")
        if not _taken(path):
            return path
    raise UserError(f"{out_dir}: no free recording name for {stem} after {_MAX_TRIES} tries")


def safe_output_path(out_dir: Path, name: str) -> Path:
    """``out_dir / name`` where ``name`` is a relative file name that stays inside ``out_dir``:
    absolute names, '..' parts and links that lead outside are refused with a UserError."""
    if not name or not name.strip():
        raise UserError("output file name is empty")
    if "\x00" in name:
        raise UserError(f"output file name {name!r} contains a NUL character")
    candidate = Path(name)
    if candidate.is_absolute() or name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise UserError(f"output file name {name!r} must be relative to the output folder {out_dir}")
    if any(part == ".." for part in re.split(r"[\\/]", name)):
        raise UserError(f"output file name {name!r} must not contain '..' (it would leave {out_dir})")
    root = Path(out_dir).resolve()
    target = (root / candidate).resolve()
    if target == root or not target.is_relative_to(root):
        raise UserError(f"output file name {name!r} leads outside the output folder {out_dir}")
    return root / candidate


def free_name(out_dir: Path, stem: str, suffix: str) -> Path:
    """The first of stem.suffix, stem_2.suffix, ... that does not exist in out_dir."""
    for n in range(1, _MAX_TRIES + 1):
        path = Path(out_dir) / (f"{stem}{suffix}" if n == 1 else f"{stem}_{n}{suffix}")
        if not _taken(path):
            return path
    raise UserError(f"{out_dir}: no free file name for {stem}{suffix} after {_MAX_TRIES} tries")


@contextmanager
def new_file(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a file that must not exist yet; it appears at ``path`` only when the block ends
    without an error (written to a hidden temporary file, then hard-linked, which unlike rename
    fails when ``path`` exists). An existing file (a recording, someone's report) is never
    replaced and readers never see half a file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # the folder, or the file's own name (too long for the file system)
        where = path if exc.errno == errno.ENAMETOOLONG else path.parent
        raise UserError(f"{where}: cannot write: {exc.strerror or exc}") from None
    # the name is ours before the file exists: an interrupt (SIGTERM as KeyboardInterrupt) at any
    # point from here on still finds it in the finally below, so no .tmp is left behind
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            where = path if exc.errno == errno.ENAMETOOLONG else path.parent
            raise UserError(f"{where}: cannot write: {exc.strerror or exc}") from None
        encoding = None if "b" in mode else "utf-8"
        try:
            with os.fdopen(fd, mode, encoding=encoding, newline="" if encoding else None) as fh:
                yield fh
        except OSError as exc:  # a full disk (ENOSPC), a quota: one line, nothing half-written left
            raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None
        os.chmod(tmp, 0o666 & ~_umask())  # an export is an ordinary file
        try:
            _publish(tmp, path)
        except FileExistsError:
            raise UserError(f"{path}: already exists; not overwriting it (choose another name)") from None
        except OSError as exc:
            raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # never created (a name too long, a folder we cannot write)
            pass


def _publish(tmp: Path, path: Path) -> None:
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:  # a file system without hard links: claim the name, then replace
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        os.replace(tmp, path)


def _umask() -> int:
    """The process umask, read without setting it (os.umask would race other threads)."""
    if sys.platform != "linux":  # no /proc/self/status: the usual default
        return 0o022
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
