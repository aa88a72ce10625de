"""The engine's side of the disk prompt cache (kv_store.py): what to save, when to restore.

Saving: a finished conversation's sequence (at least MIN_SAVE_TOKENS, or MIN_SAVE_PINNED when
it shows an image) and a pinned system prompt are remembered when they end; after the step's
deltas went out, the engine thread copies their KV out of llama.cpp (llama_state_seq_get_data,
a memcpy) and a writer thread writes the file. Restoring: a new request whose prompt has a
longer prefix on disk than in the live cache (by MIN_RESTORE_GAIN) waits while a reader thread
reads and checks the file; then the engine thread loads it into a free sequence, registers its
tokens as an idle cached sequence, and lets the request in: normal allocation reuses it like
any other.

Only the engine thread calls into llama.cpp (the SeqStateBackend); the threads here only
touch files.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from inference.kv.cache_manager import KvCacheManager, SeqState
from inference.kv.disk_store import DiskMatch, KvDiskStore, StoreError
from inference.kv.prefix_tree import common_prefix_len
from inference.request import Request

log = logging.getLogger(__name__)

# A conversation shorter than this recomputes in well under a second: not worth a file.
MIN_SAVE_TOKENS = 256
MIN_SAVE_PINNED = 32
# A disk prefix must beat the live cache by this many tokens to be loaded.
MIN_RESTORE_GAIN = 64
# Blobs waiting for the writer beyond this are dropped rather than held in memory.
MAX_PENDING_WRITE_BYTES = 512 << 20


class SeqStateBackend(Protocol):
    """llama.cpp's per-sequence state calls (engine thread only)."""

    def state_seq_get(self, seq: int) -> bytes | bytearray | memoryview: ...

    def state_seq_set(self, seq: int, data: bytearray) -> bool: ...


@dataclass(slots=True)
class _Restore:
    request: Request
    match: DiskMatch
    future: Future


@dataclass(slots=True)
class DiskCacheCounters:
    restored_tokens: int = 0  # prompt tokens that came from disk instead of prefill
    restores: int = 0
    restore_failures: int = 0  # files found bad on read or refused by llama.cpp
    saves: int = 0


class DiskPromptCache:
    def __init__(self, store: KvDiskStore, kv: KvCacheManager, backend: SeqStateBackend,
                 notify: Callable[[], None] | None = None, keep_images: bool = False) -> None:
        self.store = store
        # Whether prompts with images may be saved: only when their slots outlive the engine.
        self.keep_images = keep_images
        self.kv = kv
        self.backend = backend
        self.notify = notify  # wakes the engine loop when a read finished
        self.counters = DiskCacheCounters()
        self._to_save: list[tuple[int, list[int]]] = []
        self._restoring: list[_Restore] = []
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="chorus-kv-read")
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="chorus-kv-write")
        self._pending_bytes = 0
        self._pending_lock = threading.Lock()

    # ----- saving (engine thread) -----------------------------------------------------

    def on_finished(self, seq: int, pinned: bool) -> None:
        """A request left seq cached (idle or pinned): save it after the step."""
        n = self.kv.seq_len(seq)
        if n < MIN_SAVE_PINNED:
            return
        tokens = self.kv.seq_tokens(seq)
        shows_image = min(tokens, default=0) < 0
        # An image's ids name it by its slot: unless the projector keeps its slots across
        # restarts, another run gives them to other images, so such a prefix is not saved.
        if shows_image and not self.keep_images:
            return
        # A chat about an image is saved however short: the next question about the image
        # (after a restart too) starts from its cells, as the chats beside it do while the
        # engine runs, instead of computing them again (bench-images: with the tests' tiny
        # projector a chat about an image is about 130 tokens, and was never saved).
        if pinned or shows_image or n >= MIN_SAVE_TOKENS:
            self._to_save.append((seq, tokens))

    @property
    def saves_pending(self) -> bool:
        return bool(self._to_save)

    def save_pending(self, limit: int | None = None) -> None:
        """Copy the KV of the sequences that finished out of llama.cpp and hand it to the
        writer: all, or the first `limit`. Sequences reused since (their tokens changed)
        are skipped."""
        n = len(self._to_save) if limit is None else limit
        todo, self._to_save = self._to_save[:n], self._to_save[n:]
        for seq, tokens in todo:
            try:
                self._save(seq, tokens)
            except Exception:  # noqa: BLE001 - a cache that cannot save costs only the cache
                log.exception("could not save a prompt cache entry")

    def _save(self, seq: int, tokens: list[int]) -> None:
        if self.kv.state(seq) not in (SeqState.IDLE, SeqState.PINNED) or self.kv.seq_tokens(seq) != tokens:
            return
        if self.store.covers(tokens):
            return
        blob = self.backend.state_seq_get(seq)
        if not self._reserve_write(len(blob)):
            log.info("KV cache writer is behind: not saving %d tokens", len(tokens))
            return
        self._writer.submit(self._write, tokens, blob)

    def _reserve_write(self, n: int) -> bool:
        with self._pending_lock:
            if self._pending_bytes + n > MAX_PENDING_WRITE_BYTES:
                return False
            self._pending_bytes += n
            return True

    def _write(self, tokens: list[int], blob: bytes | bytearray | memoryview) -> None:
        try:
            if self.store.save(tokens, blob) is not None:
                self.counters.saves += 1
        except OSError as exc:  # a full disk costs the cache, never a request
            log.warning("could not save a prompt cache file: %s", exc)
        finally:
            with self._pending_lock:
                self._pending_bytes -= len(blob)

    # ----- restoring --------------------------------------------------------------------

    def begin_restore(self, req: Request) -> bool:
        """True when the disk holds a prefix of req's prompt worth loading: its file is being
        read, and req comes back from poll() once it is in the KV (or failed to load)."""
        limit = req.tokens[: req.reuse_limit]
        match = self.store.best_match(limit)
        if match is None or len(match.entry.tokens) > self.kv.n_cells:
            return False
        if match.length - self.kv.cached_prefix_len(limit) < MIN_RESTORE_GAIN:
            return False
        future = self._reader.submit(self.store.read, match.entry)
        if self.notify is not None:
            notify = self.notify
            future.add_done_callback(lambda _f: notify())
        self._restoring.append(_Restore(req, match, future))
        return True

    @property
    def restoring(self) -> int:
        return len(self._restoring)

    def wait(self, timeout: float | None = None) -> None:
        """Block until every read in flight finished (tests and shutdown)."""
        for item in list(self._restoring):
            try:
                item.future.result(timeout)
            except StoreError:
                pass

    def poll(self, promised: int) -> list[Request]:
        """Load the files read so far into the KV; returns their requests, ready to be
        scheduled. promised: cells already promised to running requests."""
        ready: list[Request] = []
        for item in [r for r in self._restoring if r.future.done()]:
            self._restoring.remove(item)
            try:
                tokens, blob = item.future.result()
            except StoreError as exc:
                log.warning("ignored a damaged prompt cache file: %s", exc)
                self.counters.restore_failures += 1
            else:
                try:
                    self._load(item, tokens, blob, promised)
                except Exception:  # noqa: BLE001 - the cache's bug must not lose the request
                    log.exception("could not restore a saved prompt")
            ready.append(item.request)
        return ready

    def _load(self, item: _Restore, tokens: list[int], blob: bytearray, promised: int) -> None:
        req = item.request
        limit = req.tokens[: req.reuse_limit]
        gain = common_prefix_len(tokens, limit)
        if gain - self.kv.cached_prefix_len(limit) < MIN_RESTORE_GAIN:
            return  # computed meanwhile by another request
        needed = len(tokens) + (len(req.tokens) - gain) + promised
        seq = self.kv.restore_slot(len(tokens), needed)
        if seq is None:
            return  # no sequence or room now: the request computes its prompt
        if not self.backend.state_seq_set(seq, blob):
            log.warning("llama.cpp refused prompt cache file %s: deleted", item.match.entry.path.name)
            self.store.discard(item.match.entry.path)
            self.kv.drop(seq)
            self.counters.restore_failures += 1
            return
        self.kv.add_restored(seq, tokens)
        self.counters.restores += 1
        self.counters.restored_tokens += gain

    # ----- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        """Finish the writes under way (a restart must find them), drop pending reads."""
        for item in self._restoring:
            item.future.cancel()
        self._reader.shutdown(wait=True)
        self._writer.shutdown(wait=True)
