"""The disk store of sequence KV state, without a model: files round-trip, the size bound
evicts the least recently used, and anything that cannot be trusted (damaged, truncated,
another format version, another model or KV layout) is ignored and deleted."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from inference.kv.disk_store import _HEADER, KEY_BYTES, VERSION, KvDiskStore, StoreError, model_key, open_disk_store

KEY = b"k" * KEY_BYTES
OTHER_KEY = b"o" * KEY_BYTES


def blob(n: int, seed: int = 1) -> bytes:
    return bytes((seed * 31 + i) % 251 for i in range(n))


def store(root: Path, limit: int = 1 << 20, key: bytes = KEY) -> KvDiskStore:
    return KvDiskStore(root, key, limit)


def only_file(s: KvDiskStore) -> Path:
    [path] = list(s.folder.glob("*.kvs"))
    return path


def test_a_saved_sequence_reads_back_and_survives_reopening(tmp_path):
    s = store(tmp_path)
    tokens = list(range(300))
    s.save(tokens, blob(5000))
    again = store(tmp_path)  # a restart: the index is rebuilt from the files
    match = again.best_match(tokens + [7, 8, 9])
    assert match is not None and match.length == 300
    got_tokens, payload = again.read(match.entry)
    assert got_tokens == tokens and bytes(payload) == blob(5000)


def test_the_longest_shared_prefix_wins_even_when_it_ends_early(tmp_path):
    s = store(tmp_path)
    s.save([1, 2, 3, 4], blob(10))
    s.save([1, 2, 9, 9, 9, 9], blob(10, 2))
    match = s.best_match([1, 2, 3, 4, 5])
    assert match is not None and match.entry.tokens == (1, 2, 3, 4) and match.length == 4
    partial = s.best_match([1, 2, 9, 9, 0])  # part of a saved sequence is still reusable
    assert partial is not None and partial.length == 4 and partial.entry.tokens[2] == 9
    assert s.best_match([5, 6]) is None


def test_a_longer_turn_replaces_the_prefix_it_extends_and_a_covered_one_is_not_written(tmp_path):
    s = store(tmp_path)
    s.save([1, 2, 3], blob(10))
    s.save([1, 2, 3, 4, 5], blob(20))
    assert [e.tokens for e in s.entries()] == [(1, 2, 3, 4, 5)]
    assert s.save([1, 2, 3, 4], blob(15)) is None  # already covered
    assert len(list(s.folder.glob("*.kvs"))) == 1


def test_the_size_bound_evicts_the_least_recently_used(tmp_path):
    entry_bytes = _HEADER.size + 4 * 3 + 1000
    s = store(tmp_path, limit=3 * entry_bytes)
    for i in range(3):
        s.save([i, i, i], blob(1000, i))
        # mtimes are the LRU order: make them distinct however coarse the filesystem clock
        os.utime(s.entries()[-1].path, ns=(i * 10**9, i * 10**9))
    oldest = next(e for e in s.entries() if e.tokens == (0, 0, 0))
    s.read(oldest)  # reading it makes it the most recently used
    s.save([9, 9, 9], blob(1000, 9))
    assert sorted(e.tokens for e in s.entries()) == [(0, 0, 0), (2, 2, 2), (9, 9, 9)]
    assert s.total_bytes() <= 3 * entry_bytes


def test_an_entry_larger_than_the_bound_is_not_written(tmp_path):
    s = store(tmp_path, limit=500)
    assert s.save([1, 2], blob(1000)) is None and s.entries() == []


@pytest.mark.parametrize("damage", ["flip_payload", "flip_token", "truncate", "trailing"])
def test_a_damaged_file_is_refused_and_deleted(tmp_path, damage):
    s = store(tmp_path)
    s.save(list(range(50)), blob(4000))
    path = only_file(s)
    data = bytearray(path.read_bytes())
    if damage == "flip_payload":
        data[-100] ^= 0xFF
    elif damage == "flip_token":
        data[_HEADER.size + 8] ^= 0x01
    elif damage == "truncate":
        del data[-10:]
    else:
        data += b"x"
    path.write_bytes(bytes(data))
    entry = s.entries()[0]
    with pytest.raises(StoreError):
        s.read(entry)
    assert not path.exists() and s.entries() == []


def test_truncated_or_foreign_files_are_dropped_when_the_store_opens(tmp_path):
    s = store(tmp_path)
    s.save(list(range(50)), blob(4000))
    path = only_file(s)
    path.write_bytes(path.read_bytes()[:-1])  # a write cut short
    (s.folder / "junk.kvs").write_bytes(b"not a cache file at all")
    (s.folder / "left.tmp").write_bytes(b"half a write")
    os.utime(s.folder / "left.tmp", (1, 1))  # long ago: a write that never finished
    (s.folder / "busy.tmp").write_bytes(b"another engine writing now")
    again = store(tmp_path)
    assert again.entries() == [] and [p.name for p in again.folder.iterdir()] == ["busy.tmp"]


def test_another_format_version_is_stale_and_deleted(tmp_path):
    s = store(tmp_path)
    s.save([1, 2, 3], blob(10))
    path = only_file(s)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 4, VERSION + 1)
    path.write_bytes(bytes(data))
    assert store(tmp_path).entries() == [] and not path.exists()


def test_a_file_of_another_model_key_is_never_loaded(tmp_path):
    mine = store(tmp_path)
    theirs = store(tmp_path, key=OTHER_KEY)
    theirs.save([1, 2, 3], blob(10))
    assert mine.best_match([1, 2, 3, 4]) is None  # each model has its own folder
    # A file moved into the wrong model's folder is refused by its header and deleted.
    moved = mine.folder / only_file(theirs).name
    only_file(theirs).rename(moved)
    assert store(tmp_path).entries() == [] and not moved.exists()


def test_the_model_key_follows_the_file_and_the_kv_layout(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(range(256)) * 100)
    key = model_key(model, "kv=f16")
    assert len(key) == KEY_BYTES and key == model_key(model, "kv=f16")
    assert model_key(model, "kv=q8_0+fa") != key
    data = bytearray(model.read_bytes())
    data[-1] ^= 1
    model.write_bytes(bytes(data))
    assert model_key(model, "kv=f16") != key


def test_a_size_of_zero_or_no_folder_disables_the_store(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(2000))
    assert open_disk_store(None, model, "kv=f16", 1024) is None
    assert open_disk_store(tmp_path / "kv", model, "kv=f16", 0) is None
    assert not (tmp_path / "kv").exists()
    enabled = open_disk_store(tmp_path / "kv", model, "kv=f16", 1)
    assert enabled is not None and enabled.limit_bytes == 1 << 20


def test_saved_files_and_their_folders_are_the_users_alone_whatever_the_umask(tmp_path, usual_umask):
    """Issue 39: the KV state of prompts and attached documents was 0644 in 0755 folders."""
    import stat

    s = store(tmp_path / "kv-cache")
    s.save(list(range(300)), blob(5000))
    modes = [oct(stat.S_IMODE(p.stat().st_mode)) for p in (only_file(s), s.folder, s.root)]
    assert modes == ["0o600", "0o700", "0o700"]
