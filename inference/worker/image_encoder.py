"""The model's vision projector (libmtmd): an image's bytes to its embedding rows, once.

Each distinct image (its bytes' sha256; one projector per engine) is encoded once and kept
in a cache bounded in bytes, least recently used first out; a request holds its images'
rows itself, so eviction never takes them from under a running one. The image's slot (the
number in its placeholder token ids, inference/params.py) is given at its first encode and
kept for the engine's life, so an image encoded again after eviction has the same ids, and
the KV cells of a prompt that showed it still match.

With a folder (the disk prompt cache's, per projector), the slots and the rows outlive the
engine: slots.txt numbers every image ever seen (so a prompt saved by the disk prompt cache
names the same images after a restart), <sha256>.npz holds an image's rows (the first question
about an image after a restart reads them instead of encoding it again).

Thread-safe: prompts are prepared on other threads than the engine's (Engine.prepare, the
engine process's preparer); libmtmd's context is used under one lock. Encoding runs there,
not on the engine thread, so the decoding tabs do not wait for it.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import IO

import llama_cpp as ll
import llama_cpp.mtmd_cpp as mtmd
import numpy as np

from inference.errors import ModelLoadError, RequestError
from inference.params import IMAGE_ROW, IMAGE_SLOT_SPAN, MAX_IMAGE_SLOTS, ImageEmbedding
from inference.worker import backend
from inference.worker.image_file import decode_image

log = logging.getLogger(__name__)

CACHE_BYTES = 256 * 1024 * 1024
DISK_CACHE_BYTES = 1024 * 1024 * 1024  # the folder's .npz files, oldest out first
_TEXT_CHUNK = 0  # MTMD_INPUT_CHUNK_TYPE_TEXT
_IMAGE_CHUNK = 1  # MTMD_INPUT_CHUNK_TYPE_IMAGE


class ImageEncoder:
    def __init__(self, mmproj: Path, model: ll.llama_model_p, n_embd: int, n_threads: int,
                 use_gpu: bool, cache_bytes: int = CACHE_BYTES, folder: Path | None = None,
                 max_whole_rows: int = IMAGE_SLOT_SPAN - 1, max_tokens: int | None = None) -> None:
        if not Path(mmproj).is_file():
            raise ModelLoadError(f"the vision projector {mmproj} does not exist")
        backend.route_mtmd_logs()
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.print_timings = False
        params.n_threads = max(1, n_threads)
        params.warmup = False
        if max_tokens is not None:  # read larger images smaller (projectors of dynamic size)
            params.image_max_tokens = max_tokens
        ctx = mtmd.mtmd_init_from_file(str(mmproj).encode(), model, params)
        if not ctx:
            raise ModelLoadError(
                f"llama.cpp could not load the vision projector {Path(mmproj).name}: not a projector, "
                "damaged, or made for another model (its output width must be the model's)")
        if not mtmd.mtmd_support_vision(ctx):
            mtmd.mtmd_free(ctx)
            raise ModelLoadError(f"{Path(mmproj).name} is a projector without vision (audio only)")
        self._ctx = ctx
        # The text model's M-RoPE (Qwen-VL): an image's rows take 2-D positions, fewer than rows.
        self.mrope = bool(mtmd.mtmd_decode_use_mrope(ctx))
        # The positions each M-RoPE piece spans, by slot and first row, of every image seen
        # since load (never evicted: a few numbers an image), for the cuts of sequences.
        self._spans: dict[int, dict[int, int]] = {}
        self.path = Path(mmproj)
        self.n_embd = n_embd
        # A bidirectional piece (Gemma 3) is decoded in one ubatch: the context's n_ubatch.
        self._max_whole_rows = max_whole_rows
        self._marker = mtmd.mtmd_default_marker()
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, ImageEmbedding] = OrderedDict()
        self._cache_bytes = cache_bytes
        self._held = 0
        self._slots: dict[str, int] = {}
        # What the image path did since load: the engine's metrics read these.
        self.images_encoded = 0
        self.images_loaded = 0  # read from the folder instead of encoded
        self.encode_s = 0.0
        self.folder = self._open_folder(folder) if folder is not None else None

    @property
    def persistent(self) -> bool:
        """Whether slots outlive the engine (a saved prompt with images means the same images
        after a restart): only then may the disk prompt cache keep prompts with images."""
        return self.folder is not None

    def _open_folder(self, folder: Path) -> Path | None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            registry = folder / "slots.txt"
            if registry.exists():
                for line in registry.read_text().splitlines():
                    slot, sha = line.split()
                    self._slots[sha] = int(slot)
            return folder
        except (OSError, ValueError) as exc:
            log.warning("images are not kept across restarts (%s): %s", folder, exc)
            self._slots.clear()
            return None

    def close(self) -> None:
        with self._lock:
            if self._ctx is not None:
                mtmd.mtmd_free(self._ctx)
                self._ctx = None

    def embed(self, data: bytes) -> ImageEmbedding:
        """The image's embedding rows: from the cache, else decoded and encoded here (on the
        caller's thread). Raises RequestError for a file that is no image it can take."""
        sha = hashlib.sha256(data).hexdigest()
        with self._lock:
            cached = self._cache.get(sha)
            if cached is not None:
                self._cache.move_to_end(sha)
                return cached
            stored = self._load(sha)
            if stored is not None:
                self._keep(stored)
                return stored
        pixels = decode_image(data)  # outside the lock: Pillow needs no projector
        with self._lock:
            cached = self._cache.get(sha)  # another thread encoded it meanwhile
            if cached is not None:
                return cached
            embedding = self._encode(sha, pixels.width, pixels.height, pixels.rgb)
            self._keep(embedding)
            self._store(embedding)
            return embedding

    def _slot(self, sha: str) -> int:
        slot = self._slots.get(sha)
        if slot is not None:
            return slot
        if self.folder is not None:
            try:  # written before any prompt with the slot can be saved
                return self._registered(self.folder, sha)
            except (OSError, ValueError) as exc:
                log.warning("images are no longer kept across restarts: %s", exc)
                self.folder = None
        return self._new_slot(sha)

    def _new_slot(self, sha: str) -> int:
        slot = max(self._slots.values(), default=0) + 1
        if slot > MAX_IMAGE_SLOTS:
            raise RequestError("the engine has numbered too many distinct images; clear its image cache folder")
        self._slots[sha] = slot
        return slot

    def _registered(self, folder: Path, sha: str) -> int:
        """The image's slot in the folder's registry, given there if new. Under a file lock,
        after reading what other engines on the same folder registered meanwhile, so two
        processes never give one slot to two images."""
        with (folder / "slots.txt").open("a+") as f:
            _lock_file(f)
            f.seek(0)
            for line in f.read().splitlines():
                known, known_sha = line.split()
                self._slots[known_sha] = int(known)
            if sha in self._slots:
                return self._slots[sha]
            slot = self._new_slot(sha)
            f.write(f"{slot} {sha}\n")
            f.flush()
            return slot

    def _load(self, sha: str) -> ImageEmbedding | None:
        """An image's rows from the folder (only for a slot the registry knows)."""
        if self.folder is None or sha not in self._slots:
            return None
        path = self.folder / f"{sha}.npz"
        try:
            with np.load(path, allow_pickle=False) as stored:
                rows, layout, bidirectional = stored["embd"], stored["layout"], stored["bidirectional"]
                mrope, spans = stored["mrope"], stored["spans"]
            if rows.ndim != 2 or rows.shape[1] != self.n_embd or rows.dtype != np.float32:
                return None
            embedding = ImageEmbedding(sha, self._slots[sha], rows, tuple(int(t) for t in layout),
                                       bool(bidirectional), mrope.astype(np.int32) if len(mrope) else None,
                                       tuple((int(row), int(n)) for row, n in spans))
        except (OSError, ValueError, KeyError):
            return None  # absent, evicted, damaged or of an older format: encoded again
        os.utime(path)  # recently used: the folder's limit removes others first
        self.images_loaded += 1
        return embedding

    def _store(self, embedding: ImageEmbedding) -> None:
        if self.folder is None:
            return
        path = self.folder / f"{embedding.sha256}.npz"
        tmp = path.with_suffix(".tmp.npz")
        try:
            np.savez(tmp, embd=embedding.embd, layout=np.array(embedding.layout, dtype=np.int32),
                     bidirectional=np.array(embedding.bidirectional),
                     mrope=embedding.mrope if embedding.mrope is not None else np.zeros((0, 3), dtype=np.int32),
                     spans=np.array(embedding.spans, dtype=np.int64).reshape(-1, 2))
            os.replace(tmp, path)
            stored = sorted(self.folder.glob("*.npz"), key=lambda p: p.stat().st_mtime)
            total = sum(p.stat().st_size for p in stored)
            for old in stored[:-1]:
                if total <= DISK_CACHE_BYTES:
                    break
                total -= old.stat().st_size
                old.unlink()
        except OSError as exc:  # a full disk costs the speed-up only
            log.warning("could not keep an image's rows on disk: %s", exc)

    def span(self, slot: int, first_row: int) -> int | None:
        """The positions a piece of an image seen since load spans (inference/positions.py);
        None: as many as its rows."""
        return self._spans.get(slot, {}).get(first_row)

    def _keep(self, embedding: ImageEmbedding) -> None:
        if embedding.spans:
            self._spans[embedding.slot] = dict(embedding.spans)
        self._cache[embedding.sha256] = embedding
        self._held += embedding.embd.nbytes
        while self._held > self._cache_bytes and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._held -= old.embd.nbytes

    def _encode(self, sha: str, width: int, height: int, rgb: bytes) -> ImageEmbedding:
        if self._ctx is None:
            raise RequestError("the vision projector was closed")
        buf = (ctypes.c_uint8 * len(rgb)).from_buffer_copy(rgb)
        bitmap = mtmd.mtmd_bitmap_init(width, height, buf)
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            text = mtmd.mtmd_input_text(self._marker, len(self._marker), False, False)
            bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
            code = mtmd.mtmd_tokenize(self._ctx, chunks, ctypes.byref(text), bitmaps, 1)
            if code != 0:
                raise RequestError(f"the vision projector could not take the image (mtmd_tokenize: {code})")
            layout: list[int] = []
            pieces: list[np.ndarray] = []
            offsets: list[np.ndarray] = []  # M-RoPE's, a piece's rows from its first position
            spans: list[tuple[int, int]] = []
            bidirectional = False
            for i in range(mtmd.mtmd_input_chunks_size(chunks)):
                chunk = mtmd.mtmd_input_chunks_get(chunks, i)
                kind = mtmd.mtmd_input_chunk_get_type(chunk)
                if kind == _TEXT_CHUNK:
                    layout += self._marker_tokens(chunk)
                elif kind == _IMAGE_CHUNK:
                    bidirectional |= self._check_piece(chunk)
                    if self.mrope:
                        offsets.append(_mrope_offsets(chunk))
                        spans.append((sum(map(len, pieces)), mtmd.mtmd_input_chunk_get_n_pos(chunk)))
                    pieces.append(self._encode_piece(chunk))
                    layout += [IMAGE_ROW] * len(pieces[-1])
                else:
                    raise RequestError("the vision projector made audio of an image")
            if not pieces:
                raise RequestError("the vision projector made nothing of the image")
            rows = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
            if len(rows) >= IMAGE_SLOT_SPAN:
                raise RequestError(f"the image takes {len(rows)} tokens; at most {IMAGE_SLOT_SPAN - 1} are taken")
            self.images_encoded += 1
            plain = len(pieces) == 1 and layout == [IMAGE_ROW] * len(rows)
            return ImageEmbedding(sha, self._slot(sha), rows, () if plain else tuple(layout), bidirectional,
                                  np.concatenate(offsets) if offsets else None, tuple(spans))
        finally:
            mtmd.mtmd_input_chunks_free(chunks)
            mtmd.mtmd_bitmap_free(bitmap)

    def _marker_tokens(self, chunk: mtmd.mtmd_input_chunk_p) -> list[int]:
        """The text the projector's format puts around or between an image's pieces."""
        tokens = _chunk_tokens(chunk)
        if any(t < 0 for t in tokens):  # libmtmd's LLAMA_TOKEN_NULL for a marker not found
            raise RequestError(f"the vision projector {self.path.name} marks images with tokens this "
                               "model's vocabulary lacks: it was made for another model")
        return tokens

    def _check_piece(self, chunk: mtmd.mtmd_input_chunk_p) -> bool:
        """Whether the piece is bidirectional; refuses what the engine cannot decode."""
        n = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
        if not self.mrope and n != mtmd.mtmd_input_chunk_get_n_pos(chunk):
            raise RequestError("this vision projector's images take other positions than rows, not supported yet")
        bidirectional = bool(mtmd.mtmd_decode_use_non_causal(self._ctx, chunk))
        if bidirectional and n > self._max_whole_rows:
            raise RequestError(f"the image takes {n} tokens decoded at once, more than the engine's "
                               f"batch of {self._max_whole_rows}: load the model with a larger n_ubatch")
        return bidirectional

    def _encode_piece(self, chunk: mtmd.mtmd_input_chunk_p) -> np.ndarray:
        n = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
        started = time.perf_counter()
        code = mtmd.mtmd_encode_chunk(self._ctx, chunk)
        if code != 0:
            raise RequestError(f"the vision projector failed to encode the image (code {code})")
        out = mtmd.mtmd_get_output_embd(self._ctx)
        rows = np.ctypeslib.as_array(out, shape=(n * self.n_embd,)).reshape(n, self.n_embd).copy()
        self.encode_s += time.perf_counter() - started
        return rows


def _mrope_offsets(chunk: mtmd.mtmd_input_chunk_p) -> np.ndarray:
    """A piece's rows' (t, y, x) M-RoPE positions less its first position, as libmtmd places them."""
    image = mtmd.mtmd_input_chunk_get_tokens_image(chunk)
    n = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
    out = np.empty((n, 3), dtype=np.int32)
    for i in range(n):
        pos = mtmd.mtmd_image_tokens_get_decoder_pos(image, 0, i)
        out[i] = (pos.t, pos.y, pos.x)
    return out


def _chunk_tokens(chunk: mtmd.mtmd_input_chunk_p) -> list[int]:
    n = ctypes.c_size_t(0)
    tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
    return [int(tokens[i]) for i in range(n.value)]


def _lock_file(f: IO[str]) -> None:
    """An exclusive lock on an open file until it is closed (where the OS has flock)."""
    try:
        import fcntl
    except ImportError:  # Windows: one engine per cache folder there
        return
    fcntl.flock(f.fileno(), fcntl.LOCK_EX)
