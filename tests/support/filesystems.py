"""Real filesystems that refuse writes, for the storage faults' tests: a file or a folder
that is read-only, and a small filesystem that fills up. All need root (mounts); without
it a read-only file or folder is its mode, and a full disk is skipped."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], check=True)


@contextlib.contextmanager
def read_only_file(path: Path) -> Iterator[Path]:
    """The file cannot be opened for writing, its folder still can."""
    with _read_only(path, 0o444):
        yield path


@contextlib.contextmanager
def read_only_folder(path: Path) -> Iterator[Path]:
    """Nothing can be created, changed or removed in the folder (or below it)."""
    path.mkdir(parents=True, exist_ok=True)
    with _read_only(path, 0o555):
        yield path


@contextlib.contextmanager
def _read_only(path: Path, mode: int) -> Iterator[None]:
    """As root (who writes past any mode) a read-only bind mount of path on itself,
    otherwise path's mode set to mode."""
    if os.geteuid() != 0:
        before = path.stat().st_mode
        path.chmod(mode)
        try:
            yield
        finally:
            path.chmod(before)
        return
    _mount("--bind", str(path), str(path))
    try:
        _mount("-o", "remount,ro,bind", str(path))
        yield
    finally:
        _umount(path)


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's syntax: "2m") at path: writes past it fail with ENOSPC."""
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a filesystem of its own (root, to mount a tmpfs)")
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    try:
        yield path
    finally:
        _umount(path)


def fill(folder: Path, leave: int = 0) -> Path:
    """A file that takes a filesystem's free space, all but `leave` bytes; delete it (or
    truncate it) to give the room back."""
    ballast = folder / "ballast"
    with ballast.open("wb") as out:
        free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
        while free > leave:
            try:
                out.write(b"\0" * min(free - leave, 1 << 20))
                out.flush()
            except OSError:
                break
            free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    return ballast
