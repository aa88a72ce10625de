"""The engines behind the app's chats: the main engine every chat shares, the pool of
engines for conversations on other models, and switching the main one to another model or
server. No Qt here: the desktop's adapter (ui/services/engine_signals.py) turns the events
below into signals.

Every local model loads with the command line's settings and its own library defaults on
top, except the fields the command line set (explicit).

Threads. Engines call back on their own threads; everything they change that the owner
reads (the engine, its name, its settings, the latest metrics' owner) is changed on the
owner's thread only, through post (the GUI thread in the desktop app), and the events are
reported there. Storage calls (the recent models) go through stored, which runs work where
the database is used (the storage thread) and hands the result back on the owner's thread.
The model library is read and marked on the engines' threads or through stored, never on
the owner's thread.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from app.documents import EngineTokens, GuessedTokens, TokenCounter
from app.engines.main_engine import MainEngine
from app.engines.process import EngineProcess
from app.engines.protocol import EngineState, EngineStatus, ManagedEngine, StateCallback
from app.engines.remote import RemoteEndpoint, RemoteEngine, RemoteError
from app.engines.router import EngineRouter
from app.engines.sources import LOCAL, ModelSource, source_of
from app.models.library import ModelDefaults, ModelLibrary, apply_defaults
from inference import BackendInfo, LoadSettings, MetricsSnapshot
from storage import CatalogRepository, ConversationRecord

log = logging.getLogger(__name__)

T = TypeVar("T")

RECENT_MODELS_SETTING = "recent_models"
RECENT_MODELS = 8


class LocalEngine(ManagedEngine, Protocol):
    """The main engine on a model of this machine (EngineProcess): it can be started again on
    another model."""

    settings: LoadSettings

    def restart(self, wait: bool = True, settings: LoadSettings | None = None) -> None: ...


class LocalEngineFactory(Protocol):
    """EngineProcess's signature: an engine not yet started, calling back on its own threads."""

    def __call__(self, settings: LoadSettings, on_metrics: Callable[[MetricsSnapshot], None],
                 on_state: StateCallback, on_progress: Callable[[float], None]) -> LocalEngine: ...


class Stored(Protocol):
    """Runs work() where storage calls run, then then(result) on the owner's thread."""

    def __call__(self, work: Callable[[], T], then: Callable[[T], Any] | None = None, /) -> object: ...


Post = Callable[[Callable[[], None]], None]  # runs a callable on the owner's thread, in order


def _ignore(*_args: object) -> None:
    pass


@dataclass
class EngineEvents:
    """What the hub reports, each on the owner's thread."""

    state_changed: Callable[[EngineState], None] = _ignore  # of the main engine
    pool_state_changed: Callable[[ModelSource, EngineState], None] = _ignore  # of a pool engine
    load_progress: Callable[[float | None], None] = _ignore  # fraction loaded, or None when done
    switching: Callable[[str], None] = _ignore  # what is being loaded or connected
    model_error: Callable[[str], None] = _ignore  # a model or server that could not be used, and why
    recent_models_changed: Callable[[list[str]], None] = _ignore  # newest first


class EngineHub:
    def __init__(self, settings: LoadSettings, catalog: CatalogRepository, stored: Stored, post: Post,
                 events: EngineEvents | None = None, library: ModelLibrary | None = None,
                 explicit: Collection[str] = (), local_engine: LocalEngineFactory = EngineProcess) -> None:
        """local_engine: makes the main engine (EngineProcess; tests script one)."""
        self.catalog = catalog
        self._stored = stored
        self._post = post
        self.events = events or EngineEvents()
        self._make_local = local_engine
        self.library = library
        self.base_settings = settings
        self.explicit = frozenset(explicit)
        self.applied = self._defaults(settings.model_path)  # the loaded model's defaults
        settings = apply_defaults(settings, self.applied, self.explicit)
        self.local_settings = settings
        self.model_name = settings.model_path.name
        self.metrics: MetricsSnapshot | None = None
        self._backend: BackendInfo | None = None  # the build the last local engine reported
        self._local = self._local_engine(settings)  # the main engine while it is local
        self._counters: dict[int, EngineTokens] = {}  # per engine (id): its remembered counts
        self._remote: RemoteEngine | None = None  # the main engine while it is a server
        self.engine: ManagedEngine = self._local
        # The main engine whichever model or server it is on now: what the HTTP server serves.
        self.main = MainEngine(lambda: self.engine)
        self.router = EngineRouter(
            lambda: self.engine, lambda: self.local_settings,
            lambda source, state: self._post(lambda: self._pool_state(source, state)),
        )
        self.router.settings_for = self._pool_settings

    def _local_engine(self, settings: LoadSettings) -> LocalEngine:
        engine: LocalEngine | None = None

        def on_state(state: EngineState) -> None:
            self._post(lambda: self._on_state(engine, state))

        engine = self._make_local(  # the engine calls these on its own threads
            settings,
            on_metrics=self._on_metrics,
            on_state=on_state,
            on_progress=lambda fraction: self._post(lambda: self.events.load_progress(fraction)),
        )
        return engine

    # ----- what the app asks --------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return self.engine.is_local

    def main_source(self) -> ModelSource:
        """The model the main engine serves: new chats, and panes that share its batch."""
        if self._remote is not None:  # the source is the server's address
            return ModelSource.remote(self._remote.endpoint.base_url, self._remote.endpoint.model)
        return ModelSource.local(self.local_settings.model_path)

    def engine_for(self, conversation: ConversationRecord) -> ManagedEngine:
        """A conversation on a model of its own (a compare pane, or a chat continued from
        one) has its own engine; every other chat shares the main engine's batch."""
        source = source_of(conversation.model_ref)
        if source is None or source.key == self.main_source().key:
            return self.engine
        return self.router.engine_for(conversation.id, source)

    def token_counter(self, engine: ManagedEngine) -> tuple[TokenCounter, int | None]:
        """How a chat's documents are counted for engine, and the tokens a request may hold
        (None: unknown). The engine counts (a local one with its model's vocabulary, in its
        own process); one not ready yet, or a server's, guesses."""
        info = engine.info
        if engine.state.status is not EngineStatus.READY:
            return GuessedTokens(), info.n_ctx if info is not None else None
        counter = self._counters.get(id(engine))
        if counter is None or counter.info is not info:  # kept per model: counts are remembered
            self._forget_closed_engines()
            counter = self._counters[id(engine)] = EngineTokens(engine)
        return counter, info.n_ctx if info is not None else None

    def _forget_closed_engines(self) -> None:
        """Drops the counters of engines no longer running: a counter holds its engine, and a
        compare pane's model closed long ago would stay in memory with it."""
        running = {id(self._local), id(self.engine), *(id(e) for e in self.router.pool.engines())}
        for key in [k for k in self._counters if k not in running]:
            del self._counters[key]

    def chat_template(self, engine: ManagedEngine) -> str | None:
        """The template source a local engine's chats are rendered with (it decides the tool
        format, app/tools/formats); None for a server's, or one still loading."""
        info = engine.info
        return None if info is None else info.chat_template

    def sees_images(self, engine: ManagedEngine) -> bool:
        """The engine's model was loaded with a vision projector (its ModelInfo says so once
        it is ready): its chats show it their images; otherwise only their names (any thread).
        A remote server's model is given the images (OpenAI image_url parts): its server
        knows whether it sees them, and says so in its error if not."""
        if not engine.is_local:
            return True
        info = engine.info
        return info is not None and info.sees_images

    def backend_info(self) -> BackendInfo | None:
        """The llama.cpp build of the local engines, as the last one that loaded reported it."""
        info = self._local.info
        return info.backend if info is not None else self._backend

    def model_label(self, conversation: ConversationRecord) -> str:
        source = source_of(conversation.model_ref)
        return source.label if source is not None else self.model_name

    def engines_metrics(self) -> dict[str, MetricsSnapshot | None]:
        """The latest snapshot of every loaded engine, the main one first (any thread)."""
        return {self.model_name: self.metrics, **self.router.metrics()}

    def loaded_paths(self) -> set[Path]:
        """The model files loaded now (the main engine and the pooled ones): what the
        library refuses to remove."""
        paths = self.router.local_paths()
        if self.is_local:
            paths.add(self.local_settings.model_path)
        return paths

    # ----- start, stop, crash ---------------------------------------------------------------

    def start(self) -> threading.Thread:
        """The recent models read, the main engine started on a thread (returned)."""
        self._stored(lambda: self.catalog.get_setting(RECENT_MODELS_SETTING, []), self.events.recent_models_changed)
        return self._start_in_background(self.engine)

    def _start_in_background(self, engine: ManagedEngine) -> threading.Thread:
        local = self._local if engine is self._local else None

        def run() -> None:
            try:
                engine.start(wait=True)
            except Exception as exc:  # its state says why; the app stays usable
                log.error("engine failed to start: %s", exc)
            else:
                if local is not None:
                    self._mark_used(local.settings.model_path)

        thread = threading.Thread(target=run, name="engine-start", daemon=True)
        thread.start()
        return thread

    def _on_metrics(self, snapshot: MetricsSnapshot) -> None:
        self.metrics = snapshot  # read by the frame timer and the monitor: one reference swap

    def _on_state(self, engine: ManagedEngine | None, state: EngineState) -> None:
        """A state of the main engine; one of an engine let go (the local one stopping after
        the switch to a server, a server that did not answer) is no news of the main one."""
        if state.info is not None and state.info.backend is not None:
            self._backend = state.info.backend
        if engine is not self.engine:
            return
        if state.status is EngineStatus.CRASHED:
            self._start_in_background(self.engine)
        self.events.state_changed(state)

    def _pool_state(self, source: ModelSource, state: EngineState) -> None:
        if state.status is EngineStatus.READY and source.kind == LOCAL:  # a model that loads is worth offering again
            self.remember_model(source.path)
            self._stored(lambda: self._mark_used(Path(source.path)))
        self.events.pool_state_changed(source, state)

    def shutdown(self) -> None:
        self.router.shutdown()
        self.engine.shutdown()

    # ----- switching the main engine --------------------------------------------------------

    def load_model(self, path: str, gpu_layers: int | None = None) -> threading.Thread:
        """Switch the main engine to another GGUF file; on failure say why and keep the old
        one. gpu_layers: the model dialog's choice; None: the model's library default, else
        the command line's."""
        if self._remote is not None:  # back from a remote server
            self._remote.shutdown()
            self._remote = None
            self._local = self._local_engine(self.local_settings)
            self.engine = self._local
        engine = self._local
        previous = engine.settings
        self.events.switching(f"loading {Path(path).name}…")

        def switch() -> None:
            # reads the library: here, not on the owner's thread
            wanted, defaults = self._settings_for(path, previous, gpu_layers)
            try:
                engine.restart(wait=True, settings=wanted)
            except Exception as exc:
                message = str(exc)
                self._post(lambda: self.events.model_error(message))
                engine.restart(wait=True, settings=previous)
            else:
                self._mark_used(wanted.model_path)
                self._post(lambda: self._loaded(wanted, defaults))
            self._post(lambda: self.events.load_progress(None))

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
                           n_gpu_layers=base.n_gpu_layers if gpu_layers is None else gpu_layers,
                           mmproj=self._projector(Path(path)))
        if self.applied.n_threads is not None:  # else keep the threads the router shared out
            settings = replace(settings, n_threads=base.n_threads, n_threads_batch=base.n_threads_batch)
        defaults = self._defaults(Path(path))
        explicit = self._explicit_for(Path(path)) | ({"n_gpu_layers"} if gpu_layers is not None else set())
        return apply_defaults(settings, defaults, explicit), defaults

    def _pool_settings(self, settings: LoadSettings) -> LoadSettings:
        """A pool engine's settings: its own model's defaults, not the main model's; its
        threads stay the router's share of the cores."""
        base = self.base_settings
        settings = replace(settings, n_ctx=base.n_ctx, chat_template=base.chat_template, n_gpu_layers=base.n_gpu_layers,
                           mmproj=self._projector(settings.model_path))
        keep = self._explicit_for(settings.model_path) | {"n_threads", "n_threads_batch"}
        return apply_defaults(settings, self._defaults(settings.model_path), keep)

    def _projector(self, model: Path) -> Path | None:
        """The command line's projector (--mmproj) belongs to the model it named: another
        model loads with none, or its own library default (apply_defaults)."""
        base = self.base_settings
        return base.mmproj if _same_file(model, base.model_path) else None

    def _explicit_for(self, model: Path) -> frozenset[str]:
        """The command line's choices that hold for model: all, except a projector for
        another model (that one's library default applies)."""
        if _same_file(model, self.base_settings.model_path):
            return self.explicit
        return self.explicit - {"mmproj"}

    def _defaults(self, path: Path) -> ModelDefaults:
        if self.library is None:
            return ModelDefaults()
        try:
            return self.library.defaults_for(path)
        except Exception as exc:  # noqa: BLE001 - the library's trouble costs the defaults, not the load
            log.warning("model defaults of %s not read: %s", path.name, exc)
            return ModelDefaults()

    def _mark_used(self, path: Path) -> None:
        """The library's last use of a model that loaded (any thread but the owner's)."""
        if self.library is None:
            return
        try:
            self.library.mark_used(path)
        except Exception as exc:  # noqa: BLE001 - bookkeeping only
            log.warning("could not mark %s used in the model library: %s", path.name, exc)

    def _loaded(self, settings: LoadSettings, defaults: ModelDefaults | None = None) -> None:
        self.model_name = settings.model_path.name
        self.applied = defaults or ModelDefaults()
        self.local_settings = settings
        self.remember_model(str(settings.model_path))
        self.events.state_changed(self.engine.state)

    def connect_remote(self, endpoint: RemoteEndpoint) -> threading.Thread:
        """Serve the chats from an OpenAI-compatible server instead of the local engine."""
        self.events.switching(f"connecting to {endpoint.base_url}…")

        def connect() -> None:
            remote = RemoteEngine(endpoint, lambda state: self._post(lambda: self._on_state(remote, state)))
            try:
                remote.start()
            except RemoteError as exc:
                message = str(exc)
                self._post(lambda: self.events.model_error(message))
                return
            self._post(lambda: self._use_remote(remote))

        thread = threading.Thread(target=connect, name="engine-remote", daemon=True)
        thread.start()
        return thread

    def _use_remote(self, remote: RemoteEngine) -> None:
        old, self.engine, self._remote = self.engine, remote, remote
        self.model_name = remote.endpoint.model
        self.router.remote_keys[remote.endpoint.base_url.rstrip("/")] = remote.endpoint.api_key or ""
        self.metrics = None
        threading.Thread(target=old.shutdown, name="engine-stop", daemon=True).start()
        self.events.state_changed(remote.state)

    # ----- recent models ------------------------------------------------------------------

    def remember_model(self, path: str) -> None:
        """Offered again in File → Recent models and in every compare pane (through stored)."""
        def work() -> list[str]:
            recent = [p for p in self.catalog.get_setting(RECENT_MODELS_SETTING, []) if p != path]
            recent = [path, *recent][:RECENT_MODELS]
            self.catalog.set_setting(RECENT_MODELS_SETTING, recent)
            return recent

        self._stored(work, self.events.recent_models_changed)


def _same_file(a: Path, b: Path) -> bool:
    return Path(os.path.abspath(a)) == Path(os.path.abspath(b))
