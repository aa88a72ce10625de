"""The disk prompt cache on a real small filesystem (a tmpfs of a few MB): it never starts a
write that would leave less than a margin free, and a write that fails (ENOSPC) leaves no
temporary file behind (issue 25: it took the last free space and left a 0-byte .tmp)."""

from __future__ import annotations

import os

import pytest

from inference.kv import disk_store
from inference.kv.disk_store import KEY_BYTES, KvDiskStore
from tests.support.filesystems import fill, small_filesystem

KEY = b"k" * KEY_BYTES
MB = 1 << 20


@pytest.fixture
def disk(tmp_path):
    with small_filesystem(tmp_path / "disk", "8m") as root:
        yield root


def free_bytes(path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def leftovers(store: KvDiskStore) -> list[str]:
    return sorted(p.name for p in store.folder.iterdir())


def test_a_write_that_would_leave_less_than_the_margin_free_is_not_started(disk):
    store = KvDiskStore(disk, KEY, limit_bytes=64 * MB)
    fill(disk, leave=4 * MB)
    before = free_bytes(disk)
    assert store.save(list(range(100)), b"\1" * (2 * MB)) is None  # it would fit, leaving ~2 MB
    assert free_bytes(disk) == before and leftovers(store) == []


def test_a_write_the_disk_cannot_hold_leaves_no_temporary_file(disk, monkeypatch):
    # Past the check, as when another writer takes the room between the check and the write.
    monkeypatch.setattr(disk_store, "FREE_MARGIN_BYTES", -8 * MB, raising=False)
    store = KvDiskStore(disk, KEY, limit_bytes=64 * MB)
    ballast = fill(disk, leave=1 * MB)
    with pytest.raises(OSError):
        store.save(list(range(100)), b"\1" * (3 * MB))
    assert leftovers(store) == [] and store.entries() == []
    ballast.unlink()  # room again: the next write is whole
    entry = store.save(list(range(100)), b"\1" * (3 * MB))
    assert entry is not None and leftovers(store) == [entry.path.name]
