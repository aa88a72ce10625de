"""Real filesystems that refuse writes, for the storage faults' tests: a file that is
read-only, and a small filesystem that fills up. Both need root (mounts); without it a
read-only file is its mode, and a full disk is skipped."""

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
    """The file cannot be opened for writing, its folder still can: as root (who writes past
    any mode) a read-only bind mount of the file on itself, otherwise mode 0444."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o444)
        try:
            yield path
        finally:
            path.chmod(mode)
        return
    _mount("--bind", str(path), str(path))
    try:
        _mount("-o", "remount,ro,bind", str(path))
        yield path
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
