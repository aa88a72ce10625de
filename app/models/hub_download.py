"""Downloading one HubFile (all its parts) into the models folder: resumable, cancellable,
sha256-checked, and installed only when every part is verified.

Where the bytes go, and why not hf_hub_download: huggingface_hub 2.x writes each download to
a process-unique `<etag>.<uuid>.incomplete` and deletes it on any failure
(file_download._download_to_tmp_and_move, huggingface_hub PR #4228), so neither a killed
process nor a cancel can be resumed from its cache, and the cache would hold a second copy
of every model. Instead each part is staged as
    <models_dir>/.partial/<owner>/<repo>/<filename>.<sha256[:12]>.incomplete
(same file system as the models folder, so installing is a rename) and fetched with the
library's own pieces: get_hf_file_metadata (the HEAD on resolve/, redirects, X-Linked-Size,
X-Linked-Etag, X-Repo-Commit) and http_get (the GET with `Range: bytes=<have>-`, its retries,
and its restart from 0 when a server ignores the range). A verified part is renamed to
<filename>.verified in the staging folder; when all parts are there they move to
<models_dir>/<owner>/<repo>/<filename>, the first part last, so that nothing partial or
unverified is ever in the models folder.

Xet-backed files (X-Xet-Hash on the HEAD) are fetched the same way, from the plain-HTTP
address the Hub's redirect gives for them: hf_xet would be faster but keeps partial state of
its own, out of reach of the staging, resume and sha256 check here.

Cancel: http_get calls the progress bar's update() before writing each chunk; the stand-in
bar raises DownloadCancelled there, so the staged file ends at a chunk boundary and resumes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, cast
from urllib.parse import urlsplit

import filelock
from huggingface_hub import constants as hf_constants
from huggingface_hub import get_hf_file_metadata, hf_hub_url
from huggingface_hub.file_download import http_get
from huggingface_hub.utils import build_hf_headers

from app.models.hub_errors import hub_errors
from app.models.hub_types import (
    DownloadCancelled,
    DownloadProgress,
    HubError,
    HubFile,
    HubFilePart,
    HubUnreachable,
    IntegrityError,
)
from app.paths import PRIVATE_FILE, private_folder, private_opener

PARTIAL_DIR = ".partial"
# http_get reads the body in chunks of this size and reports (and may be cancelled) between
# them; the library's 10 MiB would make progress and cancel lag by 10 MiB on a slow line.
CHUNK_BYTES = 1 << 20
HASH_CHUNK = 1 << 20

ProgressFn = Callable[[DownloadProgress], None]


def repo_folder(base: Path, repo_id: str) -> Path:
    owner, _, name = repo_id.partition("/")
    return base.joinpath(owner, name) if name else base / owner


def installed_path(file: HubFile, models_dir: Path) -> Path:
    """Where the file's first part is (or will be) installed."""
    return repo_folder(models_dir, file.repo_id) / file.parts[0].filename


def staged_part(file: HubFile, part: HubFilePart, models_dir: Path) -> Path:
    """The resumable part file of one part (under .partial/)."""
    tag = (part.sha256 or "nohash")[:12]
    return repo_folder(models_dir / PARTIAL_DIR, file.repo_id) / f"{part.filename}.{tag}.incomplete"


def verified_part(file: HubFile, part: HubFilePart, models_dir: Path) -> Path:
    """A part downloaded and verified, waiting for the others (not "*.gguf": nothing that
    lists models may see it)."""
    return staged_part(file, part, models_dir).with_name(Path(part.filename).name + ".verified")


class PartDownloader:
    """Downloads the parts of one HubFile; one instance per download."""

    def __init__(self, endpoint: str, token: str | None, file: HubFile, models_dir: Path,
                 progress: ProgressFn | None, cancel: threading.Event | None) -> None:
        self.endpoint = endpoint
        self.token = token
        self.file = file
        self.models_dir = models_dir
        self.progress = progress
        self.cancel = cancel
        self.done_before = 0  # bytes of the parts already finished

    def run(self) -> Path:
        _check_names(self.file)
        final = installed_path(self.file, self.models_dir)
        if self._installed():
            self._report(self.file.size_bytes, self.file.name)
            return final
        staging = repo_folder(self.models_dir / PARTIAL_DIR, self.file.repo_id)
        lock_path = staging / (self.file.name + ".lock")
        private_folder(lock_path.parent)
        lock = filelock.FileLock(str(lock_path), timeout=0, mode=PRIVATE_FILE)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise HubError(f"{self.file.name} is already being downloaded by another Chorus") from None
        try:
            self._check_space()
            verified = [self._part(p) for p in self.file.parts]
            self._install(verified)
        finally:
            lock.release()
            Path(lock.lock_file).unlink(missing_ok=True)
            _remove_empty(staging, self.models_dir / PARTIAL_DIR)  # kept while a part is in it
        return final

    def _check_space(self) -> None:
        have = 0
        for part in self.file.parts:
            for staged in (staged_part(self.file, part, self.models_dir),
                           verified_part(self.file, part, self.models_dir)):
                have += staged.stat().st_size if staged.is_file() else 0
        need = self.file.size_bytes - have
        free = shutil.disk_usage(self.models_dir).free
        if need > free:
            raise HubError(f"not enough disk space for {self.file.name}: {_gb(need)} needed, "
                           f"{_gb(free)} free in {self.models_dir}")

    def _installed(self) -> bool:
        folder = repo_folder(self.models_dir, self.file.repo_id)
        return all((folder / p.filename).is_file() and (folder / p.filename).stat().st_size == p.size_bytes
                   for p in self.file.parts)

    def _part(self, part: HubFilePart) -> Path:
        """The verified part in the staging folder, downloaded or resumed as needed."""
        incomplete = staged_part(self.file, part, self.models_dir)
        verified = verified_part(self.file, part, self.models_dir)
        if not (verified.is_file() and verified.stat().st_size == part.size_bytes):
            if not part.sha256:  # before any byte is fetched
                raise IntegrityError(f"the Hub gives no sha256 for {part.filename}; refusing an unverified file")
            self._fetch(part, incomplete)
            self._verify(part, incomplete)
            os.replace(incomplete, verified)
        self.done_before += part.size_bytes
        self._report(self.done_before, part.filename)
        return verified

    def _fetch(self, part: HubFilePart, incomplete: Path) -> None:
        private_folder(incomplete.parent)
        for stale in incomplete.parent.glob(f"{Path(part.filename).name}.*.incomplete"):
            if stale != incomplete:  # an older revision's part: its bytes would not match
                stale.unlink(missing_ok=True)
        revision = self.file.revision or "main"
        url = hf_hub_url(self.file.repo_id, part.filename, revision=revision, endpoint=self.endpoint)
        with hub_errors(self.endpoint, self.file.repo_id, part.filename):
            meta = get_hf_file_metadata(url, token=self._token_arg(), endpoint=self.endpoint)
            headers = build_hf_headers(token=self._token_arg())
            location = meta.location
            if urlsplit(location).netloc != urlsplit(url).netloc:
                # A signed CDN address: no Hub token there (as _get_metadata_or_catch_error does).
                headers.pop("authorization", None)
            expected = meta.size if meta.size is not None else part.size_bytes
            have = incomplete.stat().st_size if incomplete.exists() else 0
            if have > expected:
                incomplete.unlink()
                have = 0
            hf_constants.DOWNLOAD_CHUNK_SIZE = CHUNK_BYTES
            try:
                with open(incomplete, "ab", opener=private_opener) as out:
                    http_get(location, out, resume_size=have, headers=headers, expected_size=expected,
                             displayed_filename=part.filename, tqdm_class=cast(Any, self._meter(part)))
            except OSError as exc:
                if isinstance(exc, HubError) or type(exc).__module__.startswith(("httpx", "huggingface_hub")):
                    raise
                if exc.errno is not None:  # the disk: full, gone, not writable
                    raise HubError(f"cannot write {incomplete.name}: {exc.strerror or exc}") from None
                # http_get's size check ("Consistency check failed"): the server sent too little.
                raise HubUnreachable(f"the download of {part.filename} ended early; "
                                     "start it again to resume where it stopped") from None

    def _verify(self, part: HubFilePart, path: Path) -> None:
        expected = (part.sha256 or "").lower()  # never empty here: _part refuses that first
        digest = _sha256(path, self._check_cancel)  # a cancel here keeps the complete part
        if digest != expected:
            path.unlink(missing_ok=True)
            raise IntegrityError(
                f"{part.filename} does not match the Hub's sha256 (expected {expected[:12]}…, "
                f"got {digest[:12]}…); the download was deleted")

    def _install(self, verified: list[Path]) -> None:
        folder = repo_folder(self.models_dir, self.file.repo_id)
        # The first part last: a model folder never shows a loadable first part without the rest.
        for part, src in reversed(list(zip(self.file.parts, verified))):
            target = folder / part.filename
            private_folder(target.parent)
            os.replace(src, target)

    def _token_arg(self) -> str | None:
        return self.token  # None: huggingface_hub's own HF_TOKEN / saved login

    def _report(self, done: int, filename: str) -> None:
        if self.progress is not None:
            self.progress(DownloadProgress(done, self.file.size_bytes, filename))

    def _meter(self, part: HubFilePart) -> type:
        """A tqdm stand-in for http_get: forwards byte counts, and raises on cancel."""
        owner = self

        class _Meter:
            def __init__(self, *args: object, initial: int = 0, **kwargs: object) -> None:
                self.n = initial
                owner._check_cancel()
                owner._report(owner.done_before + self.n, part.filename)

            def update(self, n: int | float | None = 1) -> None:
                owner._check_cancel()
                self.n += int(n or 0)
                owner._report(owner.done_before + self.n, part.filename)

            def __enter__(self) -> _Meter:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def close(self) -> None:
                return None

        return _Meter

    def _check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise DownloadCancelled(f"download of {self.file.name} cancelled; it resumes where it stopped")


def _check_names(file: HubFile) -> None:
    """Names from the Hub become paths here: none may climb out of the models folder."""
    for name in (file.repo_id, *(p.filename for p in file.parts)):
        path = PurePosixPath(name)
        if not name or path.is_absolute() or ".." in path.parts or "\\" in name:
            raise HubError(f"refusing a file name the Hub should not give: {name!r}")


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def _sha256(path: Path, check: Callable[[], None]) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(HASH_CHUNK):
            check()
            h.update(chunk)
    return h.hexdigest()


def _remove_empty(folder: Path, stop: Path) -> None:
    """Removes the empty folders in and above folder, up to and including stop (.partial/)."""
    for sub, _dirs, _files in os.walk(folder, topdown=False):
        with contextlib.suppress(OSError):
            os.rmdir(sub)
    while folder != stop.parent:
        if folder.exists() and not _rmdir(folder):
            return
        folder = folder.parent


def _rmdir(folder: Path) -> bool:
    try:
        folder.rmdir()
    except OSError:
        return False
    return True
