"""The Models window's controller: Hub searches, file lists and memory estimates on worker
threads (the GUI thread never waits on the network), the download (ui/controllers/
downloads.py) with its progress in the window and the status bar, and the library, read
and written on the storage thread.

Every answer comes back through GuiCalls; answers to a question since replaced (another
search, another repository, another context) are dropped by sequence number."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from app.engines.protocol import EngineState, EngineStatus
from ui.controllers.context import ControllerContext
from ui.controllers.daemon_pool import DaemonPool
from ui.controllers.downloads import Downloads, DownloadUpdate
from ui.widgets.model_sizes import progress_text
from ui.widgets.models_window import ModelsWindow

if TYPE_CHECKING:
    from app.models.fit import FitVerdict
    from app.models.hub import HubClient, HubFile, HubRepo
    from app.models.library import LibraryEntry, ModelLibrary

log = logging.getLogger(__name__)

T = TypeVar("T")
SEARCH_LIMIT = 30
ESTIMATE_WORKERS = 3  # header reads by HTTP range, a few at a time
STATUS_MESSAGE_MS = 15_000


def hub_message(exc: BaseException) -> str:
    """One line for the window: a HubError says it all; anything else is named, and its
    traceback goes to the log only."""
    from app.models.hub import HubError

    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, HubError):
        return text
    log.error("Hub call failed", exc_info=exc)
    return f"The Hub could not be asked: {text}"


class ModelsWindowController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.window: ModelsWindow | None = None
        self._client: HubClient | None = None
        self._client_lock = threading.Lock()
        self.hub_calls = DaemonPool(2, "hub")  # searches and file lists
        self.estimates = DaemonPool(ESTIMATE_WORKERS, "hub-estimate")
        self.downloads = Downloads(self.client, ctx.models_dir, installed=self._record_download)
        self.searched = False  # the first showing lists the Hub's most downloaded GGUF repositories
        self._closing = False
        self._search_seq = self._files_seq = self._estimate_seq = 0
        self._pending: set[str] = set()  # files whose verdict has not come yet
        self._verdicts: dict[str, FitVerdict] = {}
        self._estimate_futures: list[Future] = []
        w = ctx.window
        w.models_requested.connect(self.show)
        w.download_status.clicked.connect(self.show)
        d = self.downloads
        d.started.connect(self._download_started)
        d.progressed.connect(self._download_progress)
        d.finished.connect(self._download_finished)
        d.failed.connect(self._download_failed)
        d.cancelled.connect(self._download_cancelled)
        ctx.engines.state_changed.connect(self._engine_state)

    # ----- the services, made on first use --------------------------------------------------

    def client(self) -> HubClient:
        """The Hub client (any thread): HF_ENDPOINT, HF_TOKEN, a saved login, as set now."""
        with self._client_lock:
            if self._client is None:
                from app.models.hub import HubClient

                self._client = HubClient()
            return self._client

    def library(self) -> ModelLibrary:
        """The app's model library (call it on the storage thread, like every database call)."""
        if self.ctx.library is None:  # the context always makes one; a caller's own may lack it
            from app.models.library import ModelLibrary

            self.ctx.library = ModelLibrary(self.ctx.repo.db, self.ctx.models_dir)
        return self.ctx.library

    # ----- the window -----------------------------------------------------------------------

    def show(self, library: bool = False) -> ModelsWindow:
        """The window, made on first use and kept: closing hides it, a download goes on."""
        if self.window is None:
            self.window = self._make_window()
        if library:
            self.window.show_library()
        self.window.bring_up()
        return self.window

    def _make_window(self) -> ModelsWindow:
        win = ModelsWindow(self.ctx.engines.local_settings.n_ctx, self.ctx.window)
        win.opened.connect(self._opened)
        win.results.search_requested.connect(self.search)
        win.results.repo_selected.connect(self.select_repo)
        win.files.context_changed.connect(lambda _n: self._estimate_all())
        win.files.download_requested.connect(self.download)
        win.files.cancel_requested.connect(self.downloads.cancel)
        win.files.load_requested.connect(self.load)
        win.library.load_requested.connect(self.load)
        win.library.delete_requested.connect(self.delete)
        win.library.defaults_saved.connect(self.save_defaults)
        return win

    def _opened(self) -> None:
        self.refresh_library()
        if not self.searched:
            self.searched = True
            self.search(self.window.results.query())

    # ----- worker hops ------------------------------------------------------------------------

    def _off_thread(self, pool: DaemonPool | ThreadPoolExecutor, work: Callable[[], T], then: Callable[[T], Any],
                    failed: Callable[[str], Any], describe: Callable[[BaseException], str] = hub_message) -> Future:
        """work() on pool; then(result) or failed(one line) back on the GUI thread."""
        future = pool.submit(work)

        def done(f: Future) -> None:
            if self._closing or f.cancelled():
                return
            try:
                result = f.result()
            except CancelledError:
                return
            except Exception as exc:
                message = describe(exc)
                self.ctx.gui.post(lambda: self._closing or failed(message))
            else:
                self.ctx.gui.post(lambda: self._closing or then(result))

        future.add_done_callback(done)
        return future

    def _stored(self, work: Callable[[], T], then: Callable[[T], Any], failed: Callable[[str], Any]) -> Future:
        """work() on the storage thread (the library's database calls)."""
        return self._off_thread(self.ctx.storage.executor, work, then, failed, _storage_message)

    # ----- Discover: search, files, fit ------------------------------------------------------

    def search(self, query: str) -> Future:
        self._search_seq += 1
        seq = self._search_seq
        win = self.window
        win.set_discover_message(f"Searching the Hub for “{query}”…" if query else "Asking the Hub…", error=False)
        return self._off_thread(self.hub_calls, lambda: self.client().search(query, SEARCH_LIMIT),
                                lambda repos: self._found(seq, query, repos),
                                lambda message: seq == self._search_seq and win.set_discover_message(message))

    def _found(self, seq: int, query: str, repos: list[HubRepo]) -> None:
        if seq != self._search_seq:
            return  # a later search is under way
        self.window.results.set_results(repos)
        self.window.set_discover_message("" if repos else f"No GGUF models found for “{query}”.", error=False)

    def select_repo(self, repo_id: str) -> Future:
        self._files_seq += 1
        seq = self._files_seq
        files = self.window.files
        self._cancel_estimates()
        files.clear_files(f"Listing the files of {repo_id}…")
        return self._off_thread(self.hub_calls, lambda: self.client().files(repo_id),
                                lambda found: self._listed(seq, repo_id, found),
                                lambda message: seq == self._files_seq and files.clear_files(message))

    def _listed(self, seq: int, repo_id: str, found: list[HubFile]) -> None:
        if seq != self._files_seq:
            return
        self.window.files.set_files(repo_id, found)
        self._estimate_all()

    def _estimate_all(self) -> None:
        """Each file's fit for the chosen context, computed on worker threads and shown as
        each arrives; once all are in, the best that fits is selected (unless the user chose)."""
        files = self.window.files
        self._cancel_estimates()
        self._estimate_seq += 1
        seq, n_ctx = self._estimate_seq, files.context.value()
        chosen = list(files.files.values())
        self._pending, self._verdicts = {f.name for f in chosen}, {}
        files.set_estimating()
        memory = self.estimates.submit(_machine_memory)  # once per round; first in the queue
        for f in chosen:
            self._estimate_futures.append(self._off_thread(
                self.estimates, lambda f=f: self._assess(f, n_ctx, memory),
                lambda verdict, name=f.name: self._verdict(seq, name, verdict),
                lambda message, name=f.name: self._verdict(seq, name, message)))

    def _assess(self, file: HubFile, n_ctx: int, memory: Future) -> FitVerdict:  # on a worker thread
        from app.models import fit

        ram, gpu_free = memory.result()
        estimate = self.client().estimate(file, n_ctx)
        if estimate is None:  # the header could not be read: the weights alone, at least
            return fit.assess(file.size_bytes, 0, ram, gpu_free)
        return fit.assess(estimate.total_bytes, estimate.gpu_bytes, ram, gpu_free)

    def _verdict(self, seq: int, name: str, verdict: FitVerdict | str) -> None:
        if seq != self._estimate_seq:
            return
        files = self.window.files
        files.set_verdict(name, verdict)
        if not isinstance(verdict, str):
            self._verdicts[name] = verdict
        self._pending.discard(name)
        if not self._pending and files.selected_file() is None:
            from app.models import fit

            best = fit.best_file(list(files.files.values()), self._verdicts)
            if best is not None:
                files.select(best.name)

    def _cancel_estimates(self) -> None:
        for future in self._estimate_futures:
            future.cancel()
        self._estimate_futures = []

    # ----- downloading ------------------------------------------------------------------------

    def download(self, file: HubFile) -> threading.Thread | None:
        thread = self.downloads.start(file)
        if thread is None and self.window is not None:
            self.window.files.set_idle("One download at a time: wait for this one, or cancel it.")
        return thread

    def _record_download(self, file: HubFile, path: Path) -> None:  # on the download's thread
        sha256 = file.parts[0].sha256 if file.parts else None
        self.ctx.storage.submit(lambda: self.library().record_download(path, file.repo_id, sha256)).result()

    def _download_started(self, file: HubFile) -> None:
        self.window.files.set_downloading(file.name, None, "starting…")
        self.ctx.window.download_status.set_progress(file.name, None)

    def _download_progress(self, u: DownloadUpdate) -> None:
        if not self.downloads.running:
            return  # a late report after the end
        text = progress_text(u.done_bytes, u.total_bytes, u.speed)
        self.window.files.set_downloading(u.file.name, u.fraction, text)
        self.ctx.window.download_status.set_progress(u.file.name, u.fraction, text)

    def _download_finished(self, file: HubFile, path: Path) -> None:
        self.ctx.window.download_status.clear()
        self._tell_if_hidden(f"Downloaded {file.name}: load it from Models (Ctrl+Shift+M) or the model menu")
        self.window.files.set_installed(str(path), file.name)
        self.refresh_library()
        self.ctx.events.models_changed.emit()  # the model picker lists it

    def _download_failed(self, file: HubFile, message: str) -> None:
        self.ctx.window.download_status.clear()
        self._tell_if_hidden(f"Downloading {file.name} failed: {message}")
        self.window.files.set_idle(f"Downloading {file.name} failed (the reason is above).")
        self.window.set_discover_message(message)

    def _download_cancelled(self, file: HubFile) -> None:
        self.ctx.window.download_status.clear()
        self.window.files.set_idle(f"Cancelled {file.name}; downloading it again resumes where it stopped.")

    def _tell_if_hidden(self, text: str) -> None:
        """How a download ended, in the main window's status bar when the Models window is closed."""
        if not self.window.isVisible():
            self.ctx.window.statusBar().showMessage(text, STATUS_MESSAGE_MS)

    # ----- the library --------------------------------------------------------------------

    def refresh_library(self) -> Future:
        loaded, view = self.ctx.engines.loaded_paths(), self.window.library

        def read() -> tuple[list[LibraryEntry], set[str]]:  # resolved as the library spells its paths
            return self.library().entries(), {str(p.resolve()) for p in loaded}

        return self._stored(read, lambda found: view.set_entries(*found),
                            lambda message: view.set_message(message, error=True))

    def delete(self, name: str) -> Future:
        from app.models.library import ModelInUse

        loaded, view = self.ctx.engines.loaded_paths(), self.window.library

        def work() -> str:
            try:
                self.library().remove(name, loaded)
            except ModelInUse as exc:
                return (str(exc).splitlines() or [f"{name} is loaded"])[0]
            return ""

        def then(refused: str) -> None:
            view.set_message(refused or f"Deleted {name}.", error=bool(refused))
            if not refused:
                self.refresh_library()
                self.ctx.events.models_changed.emit()

        return self._stored(work, then, lambda message: view.set_message(message, error=True))

    def save_defaults(self, name: str, values: dict) -> Future:
        from app.models.library import ModelDefaults

        view = self.window.library

        def then(_entry: LibraryEntry) -> None:
            view.set_message(f"Saved the defaults for {name}: they apply when it loads next.")
            self.refresh_library()

        return self._stored(lambda: self.library().set_defaults(name, ModelDefaults(**values)), then,
                            lambda message: view.set_message(message, error=True))

    def load(self, path: str) -> None:
        """Through the window's model_requested, as the model picker loads a file."""
        if path:
            self.ctx.window.model_requested.emit(path)

    def _engine_state(self, state: EngineState) -> None:
        """Another model loaded (EngineHub marked it used): the library shows its last use
        and which one is loaded."""
        if state.status is EngineStatus.READY and self.window is not None and self.window.isVisible():
            self.refresh_library()

    def shutdown(self) -> None:
        self._closing = True
        self.downloads.shutdown()
        self._cancel_estimates()
        self.hub_calls.shutdown()
        self.estimates.shutdown()


def _machine_memory() -> tuple[int, int | None]:
    from app.models import fit

    return fit.machine_memory()


def _storage_message(exc: BaseException) -> str:
    log.error("library call failed", exc_info=exc)
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
