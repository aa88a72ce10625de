"""Wires the window to storage and to the engine process.

Threads: the GUI thread only touches widgets; storage calls run in order on one storage
thread (as asyncio tasks on qasync's loop); engine deltas arrive on the engine client's
reader thread and StreamPresenter draws them once per frame. Every reply is checkpointed
by a ReplyRecorder on the storage thread, so the GUI never waits on the model or the disk.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace as dataclass_replace
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QByteArray, QObject, Qt, Signal

from ui.controllers.compare import CompareController
from app.server.app_server import AppServer, ServerError
from app.engines.gateway import EngineGateway
from app.engines.host import EngineClient, EngineState
from app.engines.router import EngineRouter
from app.server.openai_api import ServerConfig
from app.engines.sources import ModelSource, source_of
from app.models.probe import ModelProbe
from app.perf.monitor import PerfMonitor
from app.engines.remote import RemoteEndpoint, RemoteEngine, RemoteError
from app.chats.recorder import ReplyRecorder
from ui.controllers.stream_presenter import Stream, StreamPresenter, message_view
from inference import ChatRequest, LoadSettings, SamplingParams
from inference.metrics import MetricsSnapshot
from inference.outputs import Delta, FinishReason, Phase
from storage import CatalogRepository, ChatRepository, ConversationRecord, MessageRecord, MessageStatus, search
from ui.widgets.chat_tab import ChatTab
from ui.widgets.main_window import ConversationItem, MainWindow
from ui.widgets.chat_settings import FIELDS as SETTINGS_FIELDS
from ui.widgets.chat_settings import ChatSettingsDialog
from ui.widgets.preset_editor import PresetEditor

log = logging.getLogger(__name__)

WINDOW_SETTING = "window"
RECENT_MODELS_SETTING = "recent_models"
RECENT_MODELS = 8
TITLE_CHARS = 60
FOREGROUND, BACKGROUND = 1, 0


class GuiCalls(QObject):
    """Runs callables on the GUI thread, in order, from any thread."""

    _call = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self._call.connect(lambda fn: fn(), Qt.ConnectionType.QueuedConnection)

    def post(self, fn: Callable[[], None]) -> None:
        self._call.emit(fn)


class ChatController(QObject):
    def __init__(
        self,
        window: MainWindow,
        repo: ChatRepository,
        settings: LoadSettings,
        sampling: SamplingParams | None = None,
        models_dir: Path | None = None,
    ) -> None:
        super().__init__()
        self.sampling = sampling or SamplingParams()
        self.window = window
        self.repo = repo
        self.catalog = CatalogRepository(repo.db)
        self.model_name = settings.model_path.name
        self.gui = GuiCalls()
        self.storage = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chorus-storage")
        self.metrics: MetricsSnapshot | None = None
        self.streams = StreamPresenter(window, self.storage, on_frame=self._show_engine_metrics)
        # Deltas of the main engine: HTTP clients' go to their handles, the rest to the tabs.
        self.gateway = EngineGateway(lambda: self.engine, lambda: self.metrics, self.streams.on_delta)
        self.server = AppServer(self.gateway)
        self.monitor = PerfMonitor(
            self.engines_metrics,
            lambda m, hw: self.gui.post(lambda: window.perf_panel.add_sample(m, hw)),
        )
        self._attached: weakref.WeakSet[ChatTab] = weakref.WeakSet()
        self._local_settings = settings
        self.engine = self._local_engine(settings)
        if models_dir is None:
            models_dir = Path(repo.db.path).parent / "models"
        self.engines = EngineRouter(
            lambda: self.engine, lambda: self._local_settings, self.streams.on_delta,
            lambda source, state: self.compare.on_engine_state(source, state),
        )
        self.compare = CompareController(self, models_dir)
        window.new_chat_requested.connect(self.new_chat)
        window.open_requested.connect(self.open_conversation)
        window.search_changed.connect(self.search)
        window.rename_requested.connect(self.rename)
        window.pin_requested.connect(self.set_pinned)
        window.delete_requested.connect(self.delete)
        window.undo_delete_requested.connect(self.restore)
        window.model_requested.connect(self.load_model)
        window.model_load_requested.connect(lambda path, layers: self.load_model(path, None if layers < 0 else layers))
        window.model_probe = ModelProbe(lambda: self._local_settings)
        window.presets_requested.connect(self.edit_presets)
        window.server_start_requested.connect(self.start_server)
        window.server_stop_requested.connect(self.stop_server)
        window.remote_requested.connect(
            lambda url, model, key: self.connect_remote(RemoteEndpoint(url, model, key or None))
        )
        self.preset_editor: PresetEditor | None = None

    def _local_engine(self, settings: LoadSettings) -> EngineClient:
        # The client calls these on its reader thread.
        return EngineClient(
            settings,
            on_delta=self.gateway.on_delta,
            on_metrics=self._on_metrics,
            on_state=self._post_state,
            on_progress=lambda fraction: self.gui.post(lambda: self.window.set_load_progress(fraction)),
        )

    @property
    def local_settings(self) -> LoadSettings:
        return self._local_settings

    def main_source(self) -> ModelSource:
        """The model the main engine serves: new chats, and panes that share its batch."""
        if isinstance(self.engine, RemoteEngine):
            return ModelSource.remote(self.engine.endpoint.base_url, self.engine.endpoint.model)
        return ModelSource.local(self._local_settings.model_path)

    def engines_metrics(self) -> dict[str, MetricsSnapshot | None]:
        """The latest snapshot of every loaded engine, the main one first."""
        return {self.model_name: self.metrics, **self.engines.metrics()}

    def _engine_for(self, conversation: ConversationRecord):
        """A conversation on a model of its own (a compare pane, or a chat continued from
        one) has its own engine; every other chat shares the main engine's batch."""
        source = source_of(conversation.model_ref)
        if source is None or source.key == self.main_source().key:
            return self.engine
        return self.engines.engine_for(conversation.id, source)

    def _model_label(self, conversation: ConversationRecord) -> str:
        source = source_of(conversation.model_ref)
        return source.label if source is not None else self.model_name

    def _post_state(self, state: EngineState) -> None:
        self.gui.post(lambda: self._on_engine_state(state))

    def connect_remote(self, endpoint: RemoteEndpoint) -> threading.Thread:
        """Serve the tabs from an OpenAI-compatible server instead of the local engine."""
        self.window.set_engine_status(f"connecting to {endpoint.base_url}…")

        def switch() -> None:
            remote = RemoteEngine(endpoint, self.gateway.on_delta, self._post_state)
            try:
                remote.start()
            except RemoteError as exc:
                message = str(exc)
                self.gui.post(lambda: self.window.show_model_error(message))
                return
            old, self.engine = self.engine, remote
            self.model_name = endpoint.model
            self.engines.remote_keys[remote.endpoint.base_url.rstrip("/")] = endpoint.api_key or ""
            self.metrics = None
            old.shutdown()

        thread = threading.Thread(target=switch, name="engine-remote", daemon=True)
        thread.start()
        return thread

    # ----- start and stop --------------------------------------------------------------

    def start(self) -> None:
        self.streams.start()
        self.monitor.start()
        self.refresh_conversations()
        self.refresh_presets()
        self.in_storage(self._saved_window, self._restore_window)
        self.in_storage(lambda: self.catalog.get_setting(RECENT_MODELS_SETTING, []), self.window.set_recent_models)
        threading.Thread(target=self._start_engine, name="engine-start", daemon=True).start()

    def _saved_window(self) -> dict | None:
        saved = self.catalog.get_setting(WINDOW_SETTING)
        if saved:
            alive = {c.id for c in self.repo.list_conversations(include_archived=True)}
            saved["tabs"] = [i for i in saved.get("tabs", []) if i in alive]
            comparisons = {c.id for c in self.catalog.list_comparisons()}
            saved["comparisons"] = [i for i in saved.get("comparisons", []) if i in comparisons]
        return saved

    def _restore_window(self, saved: dict | None) -> None:
        """Geometry and open tabs of the last session."""
        if not saved:
            return
        geometry = saved.get("geometry")
        if geometry:
            self.window.restoreGeometry(QByteArray.fromBase64(geometry.encode()))
        for conv_id in saved.get("tabs", []):
            self.open_conversation(conv_id)
        for comparison_id in saved.get("comparisons", []):
            self.compare.open_comparison(comparison_id)

    def save_window(self) -> Future:
        state = {
            "geometry": bytes(self.window.saveGeometry().toBase64()).decode(),
            "tabs": [t.conversation_id for t in self.window.open_tabs()],
            "comparisons": self.compare.open_ids(),
        }
        return self.storage.submit(self.catalog.set_setting, WINDOW_SETTING, state)

    def _start_engine(self) -> None:
        try:
            self.engine.start(wait=True)
        except Exception as exc:  # shown in the status bar; the window stays usable
            log.error("engine failed to start: %s", exc)

    def load_model(self, path: str, gpu_layers: int | None = None) -> threading.Thread:
        """Switch the engine to another GGUF file; on failure say why and keep the old one.
        gpu_layers None keeps the current setting."""
        if not isinstance(self.engine, EngineClient):  # back from a remote server
            self.engine.shutdown()
            self.engine = self._local_engine(self._local_settings)
        previous = self.engine.settings
        layers = previous.n_gpu_layers if gpu_layers is None else gpu_layers
        wanted = dataclass_replace(previous, model_path=Path(path), n_gpu_layers=layers)
        self.window.set_engine_status(f"loading {Path(path).name}…")

        def switch() -> None:
            try:
                self.engine.restart(wait=True, settings=wanted)
                self.model_name = wanted.model_path.name
                self._local_settings = wanted
                self.server.rename_model(wanted.model_path.stem)
                recent = self.remember_model(str(wanted.model_path))
                self.gui.post(lambda: self.window.set_recent_models(recent))
            except Exception as exc:
                message = str(exc)
                self.gui.post(lambda: self.window.show_model_error(message))
                self.engine.restart(wait=True, settings=previous)
            self.gui.post(lambda: self.window.set_load_progress(None))

        thread = threading.Thread(target=switch, name="engine-switch", daemon=True)
        thread.start()
        return thread

    def remember_model(self, path: str) -> list[str]:
        recent = [p for p in self.catalog.get_setting(RECENT_MODELS_SETTING, []) if p != path]
        recent = [path, *recent][:RECENT_MODELS]
        self.catalog.set_setting(RECENT_MODELS_SETTING, recent)
        return recent

    # ----- the OpenAI-compatible server (off by default) --------------------------------------

    def start_server(self, host: str, port: int, api_key: str = "") -> str | None:
        """Serve the main engine over HTTP; its requests join the tabs' batch."""
        if not isinstance(self.engine, EngineClient):
            self.window.show_error("Cannot serve", "Serving needs a local model (this window uses a remote server).")
            self.window.set_server_url(None)
            return None
        config = ServerConfig(host, port, api_key or None, Path(self.model_name).stem)
        try:
            url = self.server.start(config)
        except ServerError as exc:
            self.window.show_error("Cannot serve", str(exc))
            self.window.set_server_url(None)
            return None
        self.window.set_server_url(url)
        return url

    def stop_server(self) -> None:
        self.server.stop()
        self.window.set_server_url(None)

    def shutdown(self) -> None:
        self.server.stop()
        self.save_window()
        self.streams.stop()
        self.monitor.stop()
        self.compare.shutdown()
        self.engines.shutdown()
        self.engine.shutdown()
        self.storage.shutdown(wait=True)

    # ----- storage on its thread ---------------------------------------------------------

    def in_storage(self, work: Callable, then: Callable | None = None) -> asyncio.Task:
        """Run work on the storage thread; then(result) back on the GUI thread, as an
        asyncio task on qasync's loop (the Qt event loop)."""

        async def run() -> None:
            try:
                result = await asyncio.get_running_loop().run_in_executor(self.storage, work)
            except Exception as exc:
                log.error("storage call failed: %s", exc)
                self.window.statusBar().showMessage(f"Storage error: {exc}", 8000)
                return
            if then is not None:
                then(result)

        return asyncio.ensure_future(run())

    # ----- conversations -----------------------------------------------------------------

    def refresh_conversations(self) -> asyncio.Task:
        def items():
            chats = [(c.updated_at, ConversationItem(c.id, c.title, c.pinned))
                     for c in self.repo.list_conversations(standalone_only=True)]
            comparisons = [(c.updated_at, ConversationItem(c.id, c.title, comparison=True))
                           for c in self.catalog.list_comparisons()]
            merged = sorted(chats + comparisons, key=lambda pair: (pair[1].pinned, pair[0]), reverse=True)
            return [item for _, item in merged]

        return self.in_storage(items, self.window.set_conversations)

    def search(self, text: str) -> asyncio.Task:
        if not text.strip():
            return self.refresh_conversations()

        def hits():
            seen, items = set(), []
            for hit in search(self.repo.db, text, limit=50):
                if hit.conversation_id not in seen:
                    seen.add(hit.conversation_id)
                    items.append(ConversationItem(hit.conversation_id, hit.conversation_title, subtitle=hit.snippet_text))
            return items

        return self.in_storage(hits, self.window.set_conversations)

    def rename(self, conversation_id: int, title: str) -> asyncio.Task:
        def shown(conv) -> None:
            tab = self.window.tab_for(conversation_id)
            if tab is not None:
                self.window.set_tab_title(tab, conv.title)
            self.refresh_conversations()

        return self.in_storage(lambda: self.repo.rename(conversation_id, title), shown)

    def set_pinned(self, conversation_id: int, pinned: bool) -> asyncio.Task:
        return self.in_storage(
            lambda: self.repo.update_conversation(conversation_id, pinned=pinned),
            lambda _conv: self.refresh_conversations(),
        )

    def delete(self, conversation_id: int) -> asyncio.Task:
        """Soft delete, undoable from the status bar; a reply being written is stopped."""
        stream = self.streams.stream_for(conversation_id)
        if stream is not None:
            stream.engine.cancel(stream.request_id)
        self.window.close_tab_of(conversation_id)

        def work():
            conv = self.repo.get_conversation(conversation_id)
            self.repo.delete(conversation_id)
            return conv

        def done(conv) -> None:
            self.window.offer_undo_delete(conversation_id, conv.title)
            self.refresh_conversations()

        return self.in_storage(work, done)

    def restore(self, conversation_id: int) -> asyncio.Task:
        return self.in_storage(
            lambda: self.repo.restore(conversation_id), lambda _none: self.refresh_conversations()
        )

    def new_chat(self, preset_id: int | None | object = ...) -> asyncio.Task:
        """A new tab; with a preset, its system prompt opens the chat and is pinned in the
        engine, so every tab using that preset starts from the same cached cells."""
        chosen = self.window.selected_preset() if preset_id is ... else preset_id

        def work():
            preset = self.catalog.get_preset(chosen) if chosen is not None else None
            conv = self.repo.create_conversation(
                model_ref=self.model_name,
                preset_id=chosen,
                sampling=preset.sampling if preset else None,
            )
            if preset and preset.system_prompt:
                self.repo.add_message(conv.id, "system", preset.system_prompt)
                self.engine.pin_system_prompt(preset.system_prompt)
            return conv

        def show(conv) -> None:
            tab = self.window.open_tab(conv.id, conv.title)
            self._attach(tab)
            self.open_conversation(conv.id)
            self.refresh_conversations()

        return self.in_storage(work, show)

    # ----- presets -------------------------------------------------------------------

    def refresh_presets(self) -> asyncio.Task:
        def shown(presets) -> None:
            self.window.set_presets([(p.id, p.name) for p in presets])
            if self.preset_editor is not None:
                self.preset_editor.set_presets(presets)

        return self.in_storage(self.catalog.list_presets, shown)

    def save_preset(self, preset_id: int | None, name: str, system_prompt: str, sampling: dict) -> asyncio.Task:
        def work():
            if preset_id is None:
                return self.catalog.create_preset(name, system_prompt, sampling)
            return self.catalog.update_preset(preset_id, name=name, system_prompt=system_prompt, sampling=sampling)

        return self.in_storage(work, lambda _p: self.refresh_presets())

    def delete_preset(self, preset_id: int) -> asyncio.Task:
        return self.in_storage(lambda: self.catalog.delete_preset(preset_id), lambda _n: self.refresh_presets())

    def edit_presets(self) -> PresetEditor:
        if self.preset_editor is None:
            self.preset_editor = PresetEditor(self.window)
            self.preset_editor.save_requested.connect(self.save_preset)
            self.preset_editor.delete_requested.connect(self.delete_preset)
        self.refresh_presets()
        self.preset_editor.show()
        return self.preset_editor

    def open_conversation(self, conversation_id: int) -> asyncio.Task:
        """Its tab; a conversation that is a pane of a comparison opens the comparison."""
        def load():
            return self.repo.active_path(conversation_id)

        def show(path):
            if path.conversation.comparison_id is not None:
                self.compare.open_comparison(path.conversation.comparison_id)
                return
            tab = self.window.open_tab(conversation_id, path.conversation.title)
            self._attach(tab)
            self.show_path(tab, path)
            source = source_of(path.conversation.model_ref)
            if source is not None and self.streams.stream_for(conversation_id) is None:
                tab.set_state(f"on {source.label}")  # a chat with a model of its own says which

        return self.in_storage(load, show)

    def _attach(self, tab: ChatTab) -> None:
        if tab in self._attached:
            return
        self._attached.add(tab)
        tab.send_requested.connect(lambda text, t=tab: self.send(t, text))
        tab.stop_requested.connect(lambda t=tab: self.stop(t))
        tab.regenerate_requested.connect(lambda t=tab: self.regenerate(t))
        tab.edit_requested.connect(lambda message_id, text, t=tab: self.edit_and_resend(t, message_id, text))
        tab.branch_requested.connect(lambda message_id, step, t=tab: self.switch_branch(t, message_id, step))
        tab.settings_requested.connect(lambda t=tab: self.edit_chat_settings(t))

    def show_path(self, tab: ChatTab, path) -> None:
        views = []
        for m in path.messages:
            pos = path.branches.get(m.id)
            views.append(message_view(m, (pos.index, pos.count) if pos else None))
        streaming = self.streams.stream_for(tab.conversation_id)
        tab.model.set_messages(views)
        tab.set_busy(streaming is not None)

    # ----- sending -------------------------------------------------------------------

    def send(self, tab: ChatTab, text: str) -> asyncio.Task:
        conv_id = tab.conversation_id
        tab.set_busy(True)

        def work():
            user = self.repo.add_message(conv_id, "user", text)
            conv = self.repo.get_conversation(conv_id)
            if not conv.title:
                self.repo.rename(conv_id, text[:TITLE_CHARS])
            reply = self.repo.start_reply(conv_id, parent_id=user.id, model=self._model_label(conv))
            return self.repo.active_path(conv_id), reply

        return self.in_storage(work, lambda result: self.start_stream(tab, *result))

    def regenerate(self, tab: ChatTab) -> asyncio.Task | None:
        conv_id = tab.conversation_id
        if self.streams.stream_for(conv_id) is not None:
            return None
        tab.set_busy(True)

        def work():
            path = self.repo.active_path(conv_id)
            if not path.messages:
                return None
            last = path.messages[-1]
            parent = last.parent_id if last.role == "assistant" else last.id
            reply = self.repo.start_reply(conv_id, parent_id=parent, model=self._model_label(path.conversation))
            return self.repo.active_path(conv_id), reply

        return self.in_storage(work, lambda result: self.start_stream(tab, *result) if result else tab.set_busy(False))

    def edit_and_resend(self, tab: ChatTab, message_id: int, text: str) -> asyncio.Task | None:
        """A new sibling of an earlier user message, and a reply to it; the old branch stays."""
        conv_id = tab.conversation_id
        if self.streams.stream_for(conv_id) is not None:
            return None
        tab.set_busy(True)

        def work():
            edited = self.repo.edit_message(message_id, text)
            conv = self.repo.get_conversation(conv_id)
            reply = self.repo.start_reply(conv_id, parent_id=edited.id, model=self._model_label(conv))
            return self.repo.active_path(conv_id), reply

        return self.in_storage(work, lambda result: self.start_stream(tab, *result))

    def switch_branch(self, tab: ChatTab, message_id: int, step: int) -> asyncio.Task | None:
        conv_id = tab.conversation_id
        if self.streams.stream_for(conv_id) is not None:
            return None  # the branch on screen is being written

        def work():
            siblings = self.repo.siblings(message_id)
            target = siblings.index(message_id) + step
            if 0 <= target < len(siblings):
                self.repo.switch_to(siblings[target])
            return self.repo.active_path(conv_id)

        return self.in_storage(work, lambda path: self.show_path(tab, path))

    def edit_chat_settings(self, tab: ChatTab, accept: Callable[[ChatSettingsDialog], bool] | None = None) -> asyncio.Task:
        """The chat's sampling settings in a dialog; saved with the conversation."""
        conv_id = tab.conversation_id

        def load():
            conv = self.repo.get_conversation(conv_id)
            preset = self.catalog.get_preset(conv.preset_id) if conv.preset_id else None
            return conv, preset

        def show(loaded) -> None:
            conv, preset = loaded
            defaults = {name: getattr(self.sampling, name) for name in (*SETTINGS_FIELDS, "max_tokens")}
            dialog = ChatSettingsDialog(conv.title, conv.sampling, defaults, preset.name if preset else None, self.window)
            ok = accept(dialog) if accept is not None else dialog.exec() == ChatSettingsDialog.DialogCode.Accepted
            if ok:
                values = dialog.values()
                self.in_storage(lambda: self.repo.update_conversation(conv_id, sampling={**conv.sampling, **values}))

        return self.in_storage(load, show)

    def start_stream(self, tab: ChatTab, path, reply: MessageRecord) -> None:
        self.show_path(tab, path)
        self.window.set_tab_title(tab, path.conversation.title)
        prompt = tuple(
            {"role": m.role, "content": m.content}
            for m in path.messages[:-1]
            if m.status is not MessageStatus.ERROR
        )
        request_id = uuid.uuid4().hex[:12]
        engine = self._engine_for(path.conversation)
        stream = Stream(request_id, tab.conversation_id, reply.id, ReplyRecorder(self.repo, reply.id), engine)
        self.streams.add(stream)
        priority = FOREGROUND if self.window.is_showing(tab) else BACKGROUND
        sampling = _chat_sampling(self.sampling, path.conversation.sampling)
        chat = ChatRequest(
            messages=prompt, sampling=sampling, priority=priority, request_id=request_id, fit_context=True
        )
        tab.set_busy(True)
        tab.set_state("queued")
        try:
            engine.submit(chat)
        except Exception as exc:
            self.streams.on_delta(Delta(request_id, phase=Phase.FINISHED, finish_reason=FinishReason.ERROR, error=str(exc)))
        self.refresh_conversations()

    def stop(self, tab: ChatTab) -> None:
        stream = self.streams.stream_for(tab.conversation_id)
        if stream is not None:
            stream.engine.cancel(stream.request_id)

    # ----- engine callbacks (reader thread) ------------------------------------------------

    def _on_metrics(self, snapshot: MetricsSnapshot) -> None:
        self.metrics = snapshot

    def _show_engine_metrics(self) -> None:
        m = self.metrics
        state = self.engine.state
        if state.status != "ready" or m is None:
            return
        self.window.set_engine_status(
            f"{self.model_name} · {m.running} running · {m.queued} queued · "
            f"{m.decode_tok_s:.0f} tok/s · batch {m.last_step_seqs}"
        )

    def _on_engine_state(self, state: EngineState) -> None:
        if state.status == "ready":
            self.window.set_engine_status(f"{self.model_name} ready")
        elif state.status == "crashed":
            self.window.set_engine_status("engine stopped unexpectedly — restarting…")
            threading.Thread(target=self._start_engine, name="engine-restart", daemon=True).start()
        elif state.status == "failed":
            self.window.set_engine_status(f"engine failed: {state.error}")
        else:
            self.window.set_engine_status(f"engine {state.status}")


def _chat_sampling(defaults: SamplingParams, overrides: dict) -> SamplingParams:
    """The app's sampling with a chat's own settings (from its preset) on top."""
    known = {k: v for k, v in (overrides or {}).items() if k in SamplingParams.__dataclass_fields__}
    return dataclass_replace(defaults, **known) if known else defaults
