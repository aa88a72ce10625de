"""The Models window's controller: makes the window on first use (File → Models…, the model
picker's Browse models…, a click on the status bar's download sign) and keeps it, with
Discover's Hub questions (discover.py) and the Library's reads and writes
(library.py) behind it, and runs the download (ui/services/downloads.py):
progress in the window and the status bar, the library recording the file before anyone is
told, the picker's list refreshed after. The GUI thread never waits on the network or the disk."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from app.engines.protocol import EngineState, EngineStatus
from ui.controllers.models_window.discover import DiscoverController
from ui.controllers.models_window.library import LibraryController
from ui.services.context import ControllerContext
from ui.services.downloads import Downloads, DownloadUpdate
from ui.services.worker_hops import WorkerHops
from ui.widgets.models.model_sizes import progress_text
from ui.widgets.models.models_window import ModelsWindow

if TYPE_CHECKING:
    from app.models.hub import HubClient, HubFile
    from app.models.library import ModelLibrary

STATUS_MESSAGE_MS = 15_000


class ModelsWindowController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.window: ModelsWindow | None = None
        self.discover: DiscoverController | None = None  # with the window
        self.library_tab: LibraryController | None = None
        self.hops = WorkerHops(ctx.gui)
        self._client: HubClient | None = None
        self._client_lock = threading.Lock()
        self.downloads = Downloads(self.client, ctx.models_dir, installed=self._record_download)
        self.searched = False  # the first showing lists the Hub's most downloaded GGUF repositories
        w = ctx.window
        w.models_requested.connect(self.show)
        w.status.download_status.clicked.connect(self.show)
        d = self.downloads
        d.started.connect(self._download_started)
        d.progressed.connect(self._download_progress)
        d.finished.connect(self._download_finished)
        d.failed.connect(self._download_failed)
        d.cancelled.connect(self._download_cancelled)
        ctx.engine_signals.state_changed.connect(self._engine_state)

    def client(self) -> HubClient:
        """The Hub client (any thread), made on first use: HF_ENDPOINT, HF_TOKEN or the saved
        login as they are then."""
        with self._client_lock:
            if self._client is None:
                from app.models.hub import HubClient

                self._client = HubClient(gpu_supported=self._gpu_supported)
            return self._client

    def _gpu_supported(self) -> bool:
        """As the engine reported it (this process loads no llama.cpp); False until it did."""
        backend = self.ctx.engines.backend_info()
        return backend is not None and backend.gpu_offload

    def library(self) -> ModelLibrary:
        """The app's model library (call it on the storage thread, like every database call)."""
        if self.ctx.library is None:  # the context always makes one; a caller's own may lack it
            from app.models.library import ModelLibrary

            self.ctx.library = ModelLibrary(self.ctx.repo.db, self.ctx.models_dir)
        return self.ctx.library

    # ----- the window -----------------------------------------------------------------------

    def show(self) -> ModelsWindow:
        """The window, made on first use and kept: closing hides it, a download goes on."""
        if self.window is None:
            self.window = self._make_window()
        self.window.bring_up()
        return self.window

    def _make_window(self) -> ModelsWindow:
        win = ModelsWindow(self.ctx.engines.local_settings.n_ctx, self.ctx.window)
        self.discover = DiscoverController(win, self.hops, self.client)
        self.library_tab = LibraryController(self.ctx, win.library, self.hops, self.library)
        win.opened.connect(self._opened)
        win.files.download_requested.connect(self.download)
        win.files.cancel_requested.connect(self.downloads.cancel)
        win.files.load_requested.connect(self.library_tab.load)
        return win

    def _opened(self) -> None:
        self.library_tab.refresh()
        if not self.searched:
            self.searched = True
            self.discover.search(self.window.results.query())

    def _engine_state(self, state: EngineState) -> None:
        """Another model loaded (EngineHub marked it used): the library shows its last use
        and which one is loaded."""
        if state.status is EngineStatus.READY and self.window is not None and self.window.isVisible():
            self.library_tab.refresh()

    # ----- downloading ------------------------------------------------------------------------

    def download(self, file: HubFile) -> threading.Thread | None:
        thread = self.downloads.start(file)
        if thread is None:
            self.window.files.set_idle("One download at a time: wait for this one, or cancel it.")
        return thread

    def _record_download(self, file: HubFile, path: Path) -> None:  # on the download's thread
        from app.models.hub_download import installed_path  # the Hub's code: loaded by the download already

        sha256 = file.parts[0].sha256 if file.parts else None
        projector = installed_path(file.projector, self.downloads.models_dir) if file.projector is not None else None
        self.ctx.storage.submit(lambda: self.library().record_download(path, file.repo_id, sha256,
                                                                       projector)).result()

    def _download_started(self, file: HubFile) -> None:
        self.window.files.set_downloading(file.name, None, "starting…")
        self.ctx.window.status.download_status.set_progress(file.name, None)

    def _download_progress(self, u: DownloadUpdate) -> None:
        if not self.downloads.running:
            return  # a late report after the end
        text = progress_text(u.done_bytes, u.total_bytes, u.speed)
        self.window.files.set_downloading(u.file.name, u.fraction, text)
        self.ctx.window.status.download_status.set_progress(u.file.name, u.fraction, text)

    def _download_finished(self, file: HubFile, path: Path) -> None:
        self.ctx.window.status.download_status.clear()
        vision = f" with vision projector {file.projector.name}" if file.projector is not None else ""
        self._tell_if_hidden(f"Downloaded {file.name}{vision}: load it from Models (Ctrl+Shift+M) or the model menu")
        self.window.files.set_installed(str(path), file.name, vision)
        self.library_tab.refresh()
        self.ctx.events.models_changed.emit()  # the model picker lists it

    def _download_failed(self, file: HubFile, message: str) -> None:
        self.ctx.window.status.download_status.clear()
        self._tell_if_hidden(f"Downloading {file.name} failed: {message}")
        self.window.files.set_idle(f"Downloading {file.name} failed (the reason is above).")
        self.window.set_discover_message(message)

    def _download_cancelled(self, file: HubFile) -> None:
        self.ctx.window.status.download_status.clear()
        self.window.files.set_idle(f"Cancelled {file.name}; downloading it again resumes where it stopped.")

    def _tell_if_hidden(self, text: str) -> None:
        """How a download ended, in the main window's status bar when the Models window is closed."""
        if not self.window.isVisible():
            self.ctx.window.statusBar().showMessage(text, STATUS_MESSAGE_MS)

    def shutdown(self) -> None:
        self.hops.closed = True
        self.downloads.shutdown()
        if self.discover is not None:
            self.discover.shutdown()
