"""The engines behind the window: the main engine every chat shares, the pool of engines
for conversations on other models, and switching the main one to another model or server.

Engines call back on their own threads; everything they change that the window or the
controllers read (the engine, its name, settings) is changed here on the GUI thread only,
and settings are written on the storage thread only. Signals tell the rest.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.engines.gateway import EngineGateway
from app.engines.host import EngineClient
from app.engines.protocol import EngineLike, EngineState, EngineStatus
from app.engines.remote import RemoteEndpoint, RemoteEngine, RemoteError
from app.engines.router import EngineRouter
from app.engines.sources import LOCAL, ModelSource, source_of
from app.models.library import ModelDefaults, ModelLibrary, apply_defaults
from inference import Delta, DeltaRouter, LoadSettings, MetricsSnapshot
from storage import CatalogRepository, ConversationRecord
from ui.controllers.threads import GuiCalls, StorageThread

log = logging.getLogger(__name__)

RECENT_MODELS_SETTING = "recent_models"
RECENT_MODELS = 8


class EngineHub(QObject):
    state_changed = Signal(object)  # EngineState of the main engine
    pool_state_changed = Signal(object, object)  # ModelSource, EngineState of a pool engine
    load_progress = Signal(object)  # fraction loaded, or None when done
    switching = Signal(str)  # what is being loaded or connected
    model_error = Signal(str)  # a model or server that could not be used, and why
    recent_models_changed = Signal(list)

    def __init__(self, settings: LoadSettings, catalog: CatalogRepository, storage: StorageThread,
                 gui: GuiCalls, to_views: Callable[[Delta], None], library: ModelLibrary | None = None,
                 explicit: Collection[str] = ()) -> None:
        super().__init__()
        self.catalog = catalog
        self.storage = storage
        self.gui = gui
        # Every local model loads with the command line's settings and its own library
        # defaults on top, except the fields the command line set (explicit).
        self.library = library
        self.base_settings = settings
        self.explicit = frozenset(explicit)
        self.applied = self._defaults(settings.model_path)  # the loaded model's defaults
        settings = apply_defaults(settings, self.applied, self.explicit)
        self.local_settings = settings
        self.model_name = settings.model_path.name
        self.metrics: MetricsSnapshot | None = None
        # Every engine's deltas: those of the requests registered here (HTTP clients', the
        # app's own such as titles) go to whoever registered them, the rest to the views.
        self.deltas = DeltaRouter(fallback=to_views)
        self.gateway = EngineGateway(lambda: self.engine, lambda: self.metrics, self.deltas)
        self.engine: EngineLike = self._local_engine(settings)
        self.router = EngineRouter(
            lambda: self.engine, lambda: self.local_settings, self.deltas.route,
            lambda source, state: self.gui.post(lambda: self.pool_state_changed.emit(source, state)),
        )
        self.router.settings_for = self._pool_settings
        self.pool_state_changed.connect(self._remember_loaded)

    def _local_engine(self, settings: LoadSettings) -> EngineClient:
        return EngineClient(  # the client calls these on its reader thread
            settings,
            on_delta=self.deltas.route,
            on_metrics=self._on_metrics,
            on_state=lambda state: self.gui.post(lambda: self._on_state(state)),
            on_progress=lambda fraction: self.gui.post(lambda: self.load_progress.emit(fraction)),
        )

    # ----- what the controllers ask -------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return self.engine.is_local

    def main_source(self) -> ModelSource:
        """The model the main engine serves: new chats, and panes that share its batch."""
        if isinstance(self.engine, RemoteEngine):  # the source is the server's address
            return ModelSource.remote(self.engine.endpoint.base_url, self.engine.endpoint.model)
        return ModelSource.local(self.local_settings.model_path)

    def engine_for(self, conversation: ConversationRecord):
        """A conversation on a model of its own (a compare pane, or a chat continued from
        one) has its own engine; every other chat shares the main engine's batch."""
        source = source_of(conversation.model_ref)
        if source is None or source.key == self.main_source().key:
            return self.engine
        return self.router.engine_for(conversation.id, source)

    def model_label(self, conversation: ConversationRecord) -> str:
        source = source_of(conversation.model_ref)
        return source.label if source is not None else self.model_name

    def engines_metrics(self) -> dict[str, MetricsSnapshot | None]:
        """The latest snapshot of every loaded engine, the main one first (any thread)."""
        return {self.model_name: self.metrics, **self.router.metrics()}

    # ----- start, stop, crash ---------------------------------------------------------------

    def start(self) -> None:
        self.storage.run(lambda: self.catalog.get_setting(RECENT_MODELS_SETTING, []), self.recent_models_changed.emit)
        self._start_in_background(self.engine)

    def _start_in_background(self, engine) -> None:
        def run() -> None:
            try:
                engine.start(wait=True)
            except Exception as exc:  # shown in the status bar; the window stays usable
                log.error("engine failed to start: %s", exc)
            else:
                if engine.is_local:
                    self._mark_used(engine.settings.model_path)

        threading.Thread(target=run, name="engine-start", daemon=True).start()

    def _on_metrics(self, snapshot: MetricsSnapshot) -> None:
        self.metrics = snapshot  # read by the frame timer and the monitor: one reference swap

    def _on_state(self, state: EngineState) -> None:
        if state.status is EngineStatus.CRASHED:
            self._start_in_background(self.engine)
        self.state_changed.emit(state)

    def shutdown(self) -> None:
        self.router.shutdown()
        self.engine.shutdown()

    # ----- switching the main engine --------------------------------------------------------

    def load_model(self, path: str, gpu_layers: int | None = None) -> threading.Thread:
        """Switch the main engine to another GGUF file; on failure say why and keep the old
        one. gpu_layers: the model dialog's choice; None: the model's library default, else
        the command line's."""
        if not self.is_local:  # back from a remote server
            self.engine.shutdown()
            self.engine = self._local_engine(self.local_settings)
        engine = self.engine
        previous = engine.settings
        self.switching.emit(f"loading {Path(path).name}…")

        def switch() -> None:
            # reads the library: here, not on the GUI thread
            wanted, defaults = self._settings_for(path, previous, gpu_layers)
            try:
                engine.restart(wait=True, settings=wanted)
            except Exception as exc:
                message = str(exc)
                self.gui.post(lambda: self.model_error.emit(message))
                engine.restart(wait=True, settings=previous)
            else:
                self._mark_used(wanted.model_path)
                self.gui.post(lambda: self._loaded(wanted, defaults))
            self.gui.post(lambda: self.load_progress.emit(None))

        thread = threading.Thread(target=switch, name="engine-switch", daemon=True)
        thread.start()
        return thread

    def _settings_for(self, path: str, previous: LoadSettings,
                      gpu_layers: int | None) -> tuple[LoadSettings, ModelDefaults]:
        """What path loads with (any thread): the command line's settings for the fields a
        model's defaults may set (none of the previous model's leak into this one), its
        library defaults on top unless the command line or gpu_layers chose that field."""
        base = self.base_settings
        settings = replace(previous, model_path=Path(path), n_ctx=base.n_ctx, chat_template=base.chat_template,
                           n_gpu_layers=base.n_gpu_layers if gpu_layers is None else gpu_layers)
        if self.applied.n_threads is not None:  # else keep the threads the router shared out
            settings = replace(settings, n_threads=base.n_threads, n_threads_batch=base.n_threads_batch)
        defaults = self._defaults(Path(path))
        explicit = self.explicit | ({"n_gpu_layers"} if gpu_layers is not None else set())
        return apply_defaults(settings, defaults, explicit), defaults

    def _pool_settings(self, settings: LoadSettings) -> LoadSettings:
        """A pool engine's settings: its own model's defaults, not the main model's; its
        threads stay the router's share of the cores."""
        base = self.base_settings
        settings = replace(settings, n_ctx=base.n_ctx, chat_template=base.chat_template, n_gpu_layers=base.n_gpu_layers)
        keep = self.explicit | {"n_threads", "n_threads_batch"}
        return apply_defaults(settings, self._defaults(settings.model_path), keep)

    def _defaults(self, path: Path) -> ModelDefaults:
        if self.library is None:
            return ModelDefaults()
        try:
            return self.library.defaults_for(path)
        except Exception as exc:  # noqa: BLE001 - the library's trouble costs the defaults, not the load
            log.warning("model defaults of %s not read: %s", path.name, exc)
            return ModelDefaults()

    def _mark_used(self, path: Path) -> None:
        """The library's last use of a model that loaded (any thread but the GUI's)."""
        if self.library is None:
            return
        try:
            self.library.mark_used(path)
        except Exception as exc:  # noqa: BLE001 - bookkeeping only
            log.warning("could not mark %s used in the model library: %s", path.name, exc)

    def loaded_paths(self) -> set[Path]:
        """The model files loaded now (the main engine and the pooled ones): what the
        library refuses to remove."""
        paths = self.router.local_paths()
        if self.is_local:
            paths.add(self.local_settings.model_path)
        return paths

    def _loaded(self, settings: LoadSettings, defaults: ModelDefaults | None = None) -> None:
        self.model_name = settings.model_path.name
        self.applied = defaults or ModelDefaults()
        self.local_settings = settings
        self.remember_model(str(settings.model_path))
        self.state_changed.emit(self.engine.state)

    def connect_remote(self, endpoint: RemoteEndpoint) -> threading.Thread:
        """Serve the tabs from an OpenAI-compatible server instead of the local engine."""
        self.switching.emit(f"connecting to {endpoint.base_url}…")

        def connect() -> None:
            remote = RemoteEngine(endpoint, self.deltas.route,
                                  lambda state: self.gui.post(lambda: self._on_state(state)))
            try:
                remote.start()
            except RemoteError as exc:
                message = str(exc)
                self.gui.post(lambda: self.model_error.emit(message))
                return
            self.gui.post(lambda: self._use_remote(remote))

        thread = threading.Thread(target=connect, name="engine-remote", daemon=True)
        thread.start()
        return thread

    def _use_remote(self, remote: RemoteEngine) -> None:
        old, self.engine = self.engine, remote
        self.model_name = remote.endpoint.model
        self.router.remote_keys[remote.endpoint.base_url.rstrip("/")] = remote.endpoint.api_key or ""
        self.metrics = None
        threading.Thread(target=old.shutdown, name="engine-stop", daemon=True).start()
        self.state_changed.emit(remote.state)

    # ----- recent models ------------------------------------------------------------------

    def remember_model(self, path: str) -> None:
        """Offered again in File → Recent models and in every compare pane (storage thread)."""
        def work() -> list[str]:
            recent = [p for p in self.catalog.get_setting(RECENT_MODELS_SETTING, []) if p != path]
            recent = [path, *recent][:RECENT_MODELS]
            self.catalog.set_setting(RECENT_MODELS_SETTING, recent)
            return recent

        self.storage.run(work, self.recent_models_changed.emit)

    def _remember_loaded(self, source: ModelSource, state: EngineState) -> None:
        if state.status is EngineStatus.READY and source.kind == LOCAL:  # a model that loads is worth offering again
            self.remember_model(source.path)
            self.storage.run(lambda: self._mark_used(Path(source.path)))
