"""The Hugging Face Hub for Chorus: search repositories with GGUF files, list their files,
estimate a file's memory from its header (read by HTTP range), download it.

Everything that talks HTTP goes through huggingface_hub (HfApi, get_session, the download
helpers), so HF_ENDPOINT, HF_TOKEN / `hf auth login`, HF_HUB_OFFLINE and proxies work as in
every other Hugging Face tool. Every failure is a HubError with a one-line message.
All calls block: the GUI runs them on a worker thread.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from huggingface_hub import HfApi, hf_hub_url
from huggingface_hub import constants as hf_constants
from huggingface_hub.hf_api import ModelInfo
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from app.models.hub_download import PartDownloader, installed_path
from app.models.hub_errors import hub_errors, no_connection, offline
from app.models.hub_files import group_gguf_files, is_projector, model_stem, projector_files, quant_of
from app.models.hub_types import (
    DownloadCancelled,
    DownloadProgress,
    GatedRepo,
    HubError,
    HubFile,
    HubFilePart,
    HubOffline,
    HubRepo,
    HubUnreachable,
    IntegrityError,
    RepoNotFound,
)
from inference.gguf import GgufError, GgufHeader, MemoryEstimate, estimate_memory, read_gguf_header_prefix

__all__ = [
    "DownloadCancelled", "DownloadProgress", "GatedRepo", "HubClient", "HubError", "HubFile", "HubFilePart",
    "HubOffline", "HubRepo", "HubUnreachable", "IntegrityError", "RepoNotFound", "installed_path", "quant_of",
]

# What a search asks the Hub to return per repository (ExpandModelProperty_T in hf_api.py);
# "gguf" is the Hub's summary of the repo's GGUF: architecture, context_length, chat_template.
# "siblings" (the file names) tells a vision repository: one with mmproj files.
SEARCH_FIELDS = ["downloads", "likes", "gated", "lastModified", "gguf", "siblings"]
# Header reads start with this many bytes and double until the header parses; a header is
# mostly the vocabulary (a few MB for 250k tokens), so this bounds a damaged file's cost.
FIRST_RANGE = 1 << 20
MAX_HEADER = 64 << 20
HEADER_CACHE = 64
# Seconds a Hub call may wait for an answer (huggingface_hub's session has no timeout of its
# own; its HEAD and download calls use HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT).
TIMEOUT_S = 30.0
# The connectivity check before a search: one HEAD request, bounded as a whole (a name
# lookup has no timeout of its own). Offline, list_models' pagination retried five times
# with backoff (16-24 s) before saying anything; the check answers in well under 2 s.
PROBE_TIMEOUT_S = 1.5
PROBE_FRESH_S = 60.0  # a check that passed stands this long: searches while online pay it once

# huggingface_hub gives its logger a handler of its own, and the app's root logger (chorus's
# logging.basicConfig) prints the same records again: every Hub warning came out twice.
# The app's logging is the one that prints them.
for _handler in list(logging.getLogger("huggingface_hub").handlers):
    logging.getLogger("huggingface_hub").removeHandler(_handler)


def _local_gpu_supported() -> bool:
    from inference import backend  # loads llama.cpp: only when asked (never in the window)

    return backend.gpu_offload_supported()


class HubClient:
    def __init__(self, endpoint: str | None = None, token: str | None = None,
                 gpu_supported: Callable[[], bool] | None = None) -> None:
        """gpu_supported: whether the engines' llama.cpp build offloads to a GPU (the window
        says what its engine reported; by default this process asks llama.cpp itself)."""
        self._gpu_supported = gpu_supported or _local_gpu_supported
        # Read at call time (huggingface_hub reads HF_ENDPOINT once, at its import).
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or hf_constants.ENDPOINT).rstrip("/")
        self.token = token  # None: HF_TOKEN, else the saved login (huggingface_hub's get_token)
        self._api = HfApi(endpoint=self.endpoint, token=token)
        # Headers by (repo, revision, file): a new context size is estimated without the network.
        self._headers: OrderedDict[tuple[str, str, str], GgufHeader | None] = OrderedDict()
        self._headers_lock = threading.Lock()
        # Per model (repo, revision, name without the quant, parts): the file whose headers stand
        # for its siblings' estimates, and a lock so that only one of them is read.
        self._stem_files: dict[tuple[str, str, str, int], HubFile] = {}
        self._stem_locks: dict[tuple[str, str, str, int], threading.Lock] = {}
        self._reached_at: float | None = None  # when the connectivity check last passed

    def check_connection(self) -> None:
        """Raises HubUnreachable ("No connection to the Hugging Face Hub ...") within about
        PROBE_TIMEOUT_S when the Hub's host cannot be reached at all; any HTTP answer passes.
        On huggingface_hub's session, so its proxies and certificates apply."""
        if hf_constants.is_offline_mode():
            # Said at once: the probe would fail the same way, but on a busy machine its
            # bounded wait could end first and name a missing connection instead.
            raise offline()
        if self._reached_at is not None and time.monotonic() - self._reached_at < PROBE_FRESH_S:
            return
        outcome: list[BaseException | None] = []

        def probe() -> None:
            try:
                get_session().head(self.endpoint, timeout=PROBE_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - said below, as the Hub's error
                outcome.append(exc)
            else:
                outcome.append(None)

        worker = threading.Thread(target=probe, name="hub-probe", daemon=True)
        worker.start()
        worker.join(PROBE_TIMEOUT_S)  # a lookup still hanging is left to end on its own
        if outcome and outcome[0] is None:
            self._reached_at = time.monotonic()
            return
        error = outcome[0] if outcome else None
        raise no_connection(self.endpoint, error)

    def search(self, query: str, limit: int = 30) -> list[HubRepo]:
        """Repositories with GGUF files matching query, most downloaded first; the
        connectivity check first, so that an offline machine hears so at once (no retries)."""
        self.check_connection()
        with hub_errors(self.endpoint):
            found = self._api.list_models(search=query or None, filter="gguf", sort="downloads",
                                          limit=limit, expand=SEARCH_FIELDS)  # type: ignore[arg-type]
            return [_repo(m) for m in found]

    def files(self, repo_id: str) -> list[HubFile]:
        """The repository's GGUF model files (split ones grouped), smallest first; each with
        its vision projector where the repository has some (hub_files.choose_projector)."""
        return self.repo_files(repo_id)[0]

    def repo_files(self, repo_id: str) -> tuple[list[HubFile], list[HubFile]]:
        """The repository's model files (as files()) and its vision projectors (mmproj)."""
        with hub_errors(self.endpoint, repo_id):
            info = self._api.model_info(repo_id, files_metadata=True, timeout=TIMEOUT_S)
        parts = [
            HubFilePart(s.rfilename, int(s.lfs.size if s.lfs else (s.size or 0)), s.lfs.sha256 if s.lfs else None)
            for s in info.siblings or []
        ]
        return group_gguf_files(repo_id, parts, info.sha), projector_files(repo_id, parts, info.sha)

    def estimate(self, file: HubFile, n_ctx: int, gpu_layers: int | None = None) -> MemoryEstimate | None:
        """Weights + KV cache for n_ctx, from the GGUF headers read by HTTP range requests;
        None when the headers are not a model llama.cpp would describe (not GGUF, no layers).

        The quants of one model share their header but for the tensor types, so once one
        file's header is read, its siblings (same name but for the quant, same number of
        parts) are estimated from it: the same KV cache, weights from their own size, the GPU
        share of the weights in the same proportion. A repo of 25 quants costs one header."""
        key = (file.repo_id, file.revision or "main", model_stem(file.name), len(file.parts))
        with self._headers_lock:
            key_lock = self._stem_locks.setdefault(key, threading.Lock())
        with key_lock:  # the first file of a model is read once, its siblings wait for it
            reference = self._stem_files.get(key, file)
            exact = self._exact_estimate(reference, n_ctx, gpu_layers)
            if exact is None:
                return None
            self._stem_files.setdefault(key, reference)
        if reference.name == file.name:
            return exact[0]
        estimate, header_bytes = exact
        weights = max(0, file.size_bytes - header_bytes)
        share = estimate.weights_gpu_bytes / estimate.weights_bytes if estimate.weights_bytes else 0.0
        return dataclasses.replace(estimate, weights_bytes=weights, weights_gpu_bytes=round(weights * share))

    def _exact_estimate(self, file: HubFile, n_ctx: int,
                        gpu_layers: int | None) -> tuple[MemoryEstimate, int] | None:
        """The estimate from the file's own headers, and the bytes its headers take."""
        headers = [self.read_header(file, part) for part in file.parts]
        if any(h is None for h in headers):
            return None
        read = [h for h in headers if h is not None]
        try:
            estimate = estimate_memory(_joined(read), n_ctx, gpu_layers=gpu_layers,
                                       gpu_supported=self._gpu_supported())
        except GgufError:
            return None
        return estimate, sum(h.data_offset for h in read)

    def read_header(self, file: HubFile, part: HubFilePart) -> GgufHeader | None:
        """One part's GGUF header, reading more of the file until it parses (cached)."""
        key = (file.repo_id, file.revision or "main", part.filename)
        with self._headers_lock:
            if key in self._headers:
                self._headers.move_to_end(key)
                return self._headers[key]
        header = self._fetch_header(file, part)
        with self._headers_lock:
            self._headers[key] = header
            while len(self._headers) > HEADER_CACHE:
                self._headers.popitem(last=False)
        return header

    def _fetch_header(self, file: HubFile, part: HubFilePart) -> GgufHeader | None:
        url = hf_hub_url(file.repo_id, part.filename, revision=file.revision or "main", endpoint=self.endpoint)
        data = b""
        want = FIRST_RANGE
        with hub_errors(self.endpoint, file.repo_id, part.filename):
            while True:
                end = min(want, part.size_bytes) - 1
                data += self._range(url, len(data), end)
                try:
                    header = read_gguf_header_prefix(data, part.filename, part.size_bytes)
                except GgufError:
                    return None
                if header is not None:
                    return header
                if len(data) >= min(MAX_HEADER, part.size_bytes):
                    return None
                want *= 2

    def _range(self, url: str, start: int, end: int) -> bytes:
        """Bytes start..end (inclusive) of the file at url."""
        headers = build_hf_headers(token=self.token)
        headers["Range"] = f"bytes={start}-{end}"
        headers["Accept-Encoding"] = "identity"
        want = end + 1 - start
        out = bytearray()
        # The library's session: offline mode, proxies, and the Hub's redirect to its CDN.
        with get_session().stream("GET", url, headers=headers, follow_redirects=True,
                                  timeout=TIMEOUT_S) as response:
            hf_raise_for_status(response)
            skip = start if response.status_code == 200 else 0  # a server that ignores Range
            for chunk in response.iter_bytes():
                if skip:
                    dropped = min(skip, len(chunk))
                    chunk, skip = chunk[dropped:], skip - dropped
                out += chunk
                if len(out) >= want:  # read no further than asked, whatever was sent
                    break
        return bytes(out[:want])

    def download(
        self,
        file: HubFile,
        models_dir: Path,
        progress: Callable[[DownloadProgress], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Path:
        """Downloads (or resumes) every part, checks each sha256, installs them; returns the
        first part's path under models_dir/<owner>/<repo>/. A vision model's projector
        (file.projector) comes after it, into the same folder (installed_path(file.projector,
        models_dir)); progress counts both. Blocking."""
        model = PartDownloader(self.endpoint, self.token, file, Path(models_dir),
                               _counted(progress, 0, file.download_bytes), cancel).run()
        if file.projector is not None:
            PartDownloader(self.endpoint, self.token, file.projector, Path(models_dir),
                           _counted(progress, file.size_bytes, file.download_bytes), cancel).run()
        return model


def _counted(progress: Callable[[DownloadProgress], None] | None, before: int,
             total: int) -> Callable[[DownloadProgress], None] | None:
    """progress for one file of a download of several: its bytes after those before it, of total."""
    if progress is None:
        return None
    return lambda p: progress(DownloadProgress(before + p.done_bytes, total, p.filename))


def _repo(m: ModelInfo) -> HubRepo:
    gguf = m.gguf if isinstance(m.gguf, dict) else {}
    ctx = gguf.get("context_length")
    return HubRepo(
        repo_id=m.id,
        downloads=int(m.downloads or 0),
        likes=int(m.likes or 0),
        gated=bool(m.gated),
        last_modified=m.last_modified,
        architecture=gguf.get("architecture") or None,
        context_length=int(ctx) if isinstance(ctx, (int, float)) and ctx > 0 else None,
        sees_images=any(is_projector(s.rfilename) for s in m.siblings or []),
    )


def _joined(headers: list[GgufHeader]) -> GgufHeader:
    """One header for a split model: the first part's metadata, every part's tensors and data."""
    if len(headers) == 1:
        return headers[0]
    first = headers[0]
    tensors = tuple(t for h in headers for t in h.tensors)
    data = sum(h.data_bytes for h in headers)
    return GgufHeader(first.path, first.version, first.metadata, tensors, 0, data)
