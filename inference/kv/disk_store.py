"""A disk store of sequence KV state: prompt caches that survive a restart.

One file per saved sequence, under <root>/<model key>/, each holding the token ids the
sequence's KV covers and llama.cpp's serialized state of that sequence
(llama_state_seq_get_data). The store keeps an index of token prefixes in memory, finds
the longest one a new prompt starts with, and bounds its total size (least recently used
files go first). Everything read is checked: a file of another format version or model,
a damaged or truncated one is deleted, never loaded.

Thread-safe: the engine thread looks up and reads (or a loader thread reads for it), a
writer thread writes (KvStoreWriter); one lock guards the index.

The files hold the KV state of prompts and attached documents, as private as the chats:
the folders are made 0700 and the files 0600, whatever the process's umask.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from inference.kv.prefix_tree import common_prefix_len

log = logging.getLogger(__name__)

MAGIC = b"CHKV"
VERSION = 1
KEY_BYTES = 32
# magic, version, model key, token count, payload bytes, crc32 of tokens + payload
_HEADER = struct.Struct(f"<4sI{KEY_BYTES}sIQI")
SUFFIX = ".kvs"
# A temporary file older than this is what an interrupted write left: deleted at open.
LEFTOVER_AGE_S = 3600
# A write that would leave less than this free on its disk is not started: the cache is a
# speed-up, and the last free megabytes belong to the chat database and everything else.
FREE_MARGIN_BYTES = 256 << 20
# How much of a model file the key reads: the whole GGUF header (metadata, tensor table)
# sits in its first megabytes; samples of the data below catch a re-quantization or a
# fine-tune with the same layout.
HEAD_BYTES = 8 << 20
SAMPLES = 32
SAMPLE_BYTES = 64 << 10


class StoreError(ValueError):
    """A file that must not be loaded (damaged, truncated, another model or version)."""


def model_key(model_path: Path, layout: str) -> bytes:
    """The identity of a model file and of the KV layout its state blobs have.

    Not a full sha256 of the file: that reads gigabytes at every load. The size, the
    first HEAD_BYTES (GGUF header, metadata and tensor table) and SAMPLES slices spread
    over the rest identify a file for this purpose at a few megabytes' read. layout names
    what else a blob depends on (KV cache type, flash attention, llama.cpp's version):
    a blob saved under another layout must never be loaded.
    """
    h = hashlib.sha256()
    size = model_path.stat().st_size
    h.update(struct.pack("<Q", size))
    h.update(layout.encode())
    with model_path.open("rb") as f:
        h.update(f.read(HEAD_BYTES))
        if size > HEAD_BYTES:
            stride = (size - HEAD_BYTES) // SAMPLES
            for i in range(SAMPLES):
                f.seek(HEAD_BYTES + i * stride)
                h.update(f.read(SAMPLE_BYTES))
    return h.digest()


@dataclass(frozen=True, slots=True)
class StoredPrefix:
    """One saved sequence, as the index knows it (the blob stays on disk)."""

    path: Path
    tokens: tuple[int, ...]
    size: int  # bytes on disk


@dataclass(frozen=True, slots=True)
class DiskMatch:
    """A saved sequence sharing a prefix with a query (the in-memory tree's own match is
    prefix_tree.PrefixMatch)."""

    entry: StoredPrefix
    length: int  # tokens of the query the entry's KV covers


def _checksum(tokens: bytes, payload: bytes | bytearray | memoryview) -> int:
    return zlib.crc32(payload, zlib.crc32(tokens))


def _pack_tokens(tokens: tuple[int, ...] | list[int]) -> bytes:
    return struct.pack(f"<{len(tokens)}i", *tokens)


class KvDiskStore:
    def __init__(self, root: Path, key: bytes, limit_bytes: int) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a model key is {KEY_BYTES} bytes, got {len(key)}")
        self.root = root
        self.key = key
        self.limit_bytes = limit_bytes
        self.folder = root / key.hex()[:32]
        self._lock = threading.Lock()
        self._entries: dict[Path, StoredPrefix] = {}
        root.mkdir(mode=0o700, parents=True, exist_ok=True)  # its parents: the app's data folder, private too
        self.folder.mkdir(mode=0o700, exist_ok=True)
        self._scan()

    # ----- lookups -----------------------------------------------------------------

    def entries(self) -> list[StoredPrefix]:
        with self._lock:
            return list(self._entries.values())

    def best_match(self, tokens: list[int]) -> DiskMatch | None:
        """The saved sequence sharing the longest prefix with tokens (None: none shares any)."""
        best: DiskMatch | None = None
        for entry in self.entries():
            n = common_prefix_len(list(entry.tokens), tokens)
            if n and (best is None or n > best.length):
                best = DiskMatch(entry, n)
        return best

    def total_bytes(self) -> int:
        """Bytes of every store file under root (all models): what the limit bounds."""
        return sum(size for _path, size, _used in self._all_files())

    # ----- reading -----------------------------------------------------------------

    def read(self, entry: StoredPrefix) -> tuple[list[int], bytearray]:
        """The entry's tokens and state blob, checked; a bad file is deleted and raises
        StoreError. Marks the entry used (its file's mtime: the LRU order)."""
        try:
            tokens, payload = self._read_file(entry.path)
        except (OSError, StoreError, struct.error) as exc:
            self.discard(entry.path)
            raise StoreError(f"{entry.path.name}: {exc}") from exc
        self._touch(entry.path)
        return tokens, payload

    def _read_file(self, path: Path) -> tuple[list[int], bytearray]:
        with path.open("rb") as f:
            n_tokens, n_payload, crc = self._read_header(f)
            token_bytes = f.read(4 * n_tokens)
            payload = bytearray(n_payload)
            got = f.readinto(payload)
            if len(token_bytes) != 4 * n_tokens or got != n_payload:
                raise StoreError("truncated")
            if f.read(1):
                raise StoreError("trailing bytes")
        if _checksum(token_bytes, payload) != crc:
            raise StoreError("checksum mismatch")
        return list(struct.unpack(f"<{n_tokens}i", token_bytes)), payload

    def _read_header(self, f) -> tuple[int, int, int]:
        raw = f.read(_HEADER.size)
        if len(raw) != _HEADER.size:
            raise StoreError("truncated header")
        magic, version, key, n_tokens, n_payload, crc = _HEADER.unpack(raw)
        if magic != MAGIC:
            raise StoreError("not a KV store file")
        if version != VERSION:
            raise StoreError(f"format version {version}, expected {VERSION}")
        if key != self.key:
            raise StoreError("saved for another model or KV layout")
        return n_tokens, n_payload, crc

    # ----- writing -----------------------------------------------------------------

    def save(self, tokens: list[int], payload: bytes | bytearray | memoryview) -> StoredPrefix | None:
        """Write one sequence's state (atomically: a reader never sees half a file), drop
        saved prefixes it extends, then evict down to the limit. None when disabled, when
        it alone exceeds the limit, or when a saved entry already covers these tokens."""
        if self.limit_bytes <= 0 or not tokens:
            return None
        token_bytes = _pack_tokens(tokens)
        size = _HEADER.size + len(token_bytes) + len(payload)
        if size > self.limit_bytes:
            return None
        covered = self.covers(tokens)
        if covered is not None:
            self._touch(covered.path)
            return None
        if not self._room_for(size):
            return None
        path = self.folder / (hashlib.sha256(token_bytes).hexdigest()[:32] + SUFFIX)
        header = _HEADER.pack(MAGIC, VERSION, self.key, len(tokens), len(payload),
                              _checksum(token_bytes, payload))
        _write_whole(path, (header, token_bytes, payload))
        entry = StoredPrefix(path, tuple(tokens), size)
        with self._lock:
            self._entries[path] = entry
        for old in self._extended_by(tokens, path):
            self.discard(old.path)
        self._evict(keep=path)
        return entry

    def _room_for(self, size: int) -> bool:
        try:
            free = shutil.disk_usage(self.folder).free
        except OSError:
            return True  # cannot tell: the write itself will say
        if free - size < FREE_MARGIN_BYTES:
            log.info("prompt cache: not saving %d bytes, %d MB free on its disk", size, free >> 20)
            return False
        return True

    def covers(self, tokens: list[int]) -> StoredPrefix | None:
        """A saved entry whose tokens start with all of these (saving them adds nothing)."""
        n = len(tokens)
        for entry in self.entries():
            if len(entry.tokens) >= n and list(entry.tokens[:n]) == tokens:
                return entry
        return None

    def _extended_by(self, tokens: list[int], path: Path) -> list[StoredPrefix]:
        return [e for e in self.entries()
                if e.path != path and len(e.tokens) < len(tokens) and list(e.tokens) == tokens[: len(e.tokens)]]

    def discard(self, path: Path) -> None:
        with self._lock:
            self._entries.pop(path, None)
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not delete %s: %s", path, exc)

    # ----- internals ---------------------------------------------------------------

    def _touch(self, path: Path) -> None:
        try:
            os.utime(path)
        except OSError:
            pass

    def _scan(self) -> None:
        """Index this model's files; delete any that cannot be ours (header checked here,
        the checksum when one is read) and leftovers of interrupted writes."""
        for path in self.folder.iterdir():
            if path.suffix != SUFFIX:
                if _stale_leftover(path):
                    path.unlink(missing_ok=True)
                continue
            try:
                with path.open("rb") as f:
                    n_tokens, n_payload, _crc = self._read_header(f)
                    token_bytes = f.read(4 * n_tokens)
                size = path.stat().st_size
                if len(token_bytes) != 4 * n_tokens or size != _HEADER.size + 4 * n_tokens + n_payload:
                    raise StoreError("truncated")
            except (OSError, StoreError, struct.error) as exc:
                log.info("dropping KV cache file %s: %s", path.name, exc)
                path.unlink(missing_ok=True)
                continue
            tokens = struct.unpack(f"<{n_tokens}i", token_bytes)
            self._entries[path] = StoredPrefix(path, tokens, size)
        self._evict(keep=None)

    def _all_files(self) -> list[tuple[Path, int, int]]:
        files = []
        for path in self.root.glob(f"*/*{SUFFIX}"):
            try:
                st = path.stat()
            except OSError:
                continue
            files.append((path, st.st_size, st.st_mtime_ns))
        return files

    def _evict(self, keep: Path | None) -> None:
        """Delete the least recently used files (any model's) until the total fits."""
        files = sorted(self._all_files(), key=lambda f: f[2])
        total = sum(size for _p, size, _t in files)
        for path, size, _used in files:
            if total <= self.limit_bytes:
                break
            if path == keep:
                continue
            self.discard(path)
            total -= size


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def _write_whole(path: Path, parts: tuple[bytes | bytearray | memoryview, ...]) -> None:
    """Written to a temporary file renamed into place (a reader never sees half a file);
    a write that fails (a full disk) deletes its temporary file and raises."""
    # Unique: two engines of one model (the app and `chorus serve`) may save at once.
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb", opener=_private) as f:
            for part in parts:
                f.write(part)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _stale_leftover(path: Path) -> bool:
    """A file of an interrupted write (not one another engine is writing right now)."""
    try:
        return time.time() - path.stat().st_mtime > LEFTOVER_AGE_S
    except OSError:
        return False


def open_disk_store(root: Path | None, model_path: Path, layout: str, limit_mb: int) -> KvDiskStore | None:
    """The store for this model, or None when disabled (no folder, or a limit of 0)."""
    if root is None or limit_mb <= 0:
        return None
    return KvDiskStore(root, model_key(model_path, layout), limit_mb << 20)
