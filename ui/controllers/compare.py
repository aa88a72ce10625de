"""Wires compare views to storage and engines.

A comparison is a group of conversations, one per pane. Sending writes the same user
message into each of them and starts one reply per pane through the conversation actions, which
sends each conversation to the engine of its model: panes on the main model share the main
engine (one batch, one cached prompt prefix); panes on other models get engines of their own
from the pool, which run at the same time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from functools import partial

from app.chats.titles import stand_in_title
from app.compare.export import reply_stats
from app.compare.state import ComparisonState
from app.conversations import ConversationSession
from app.engines.hub import RECENT_MODELS_SETTING
from app.engines.protocol import EngineState, EngineStatus
from app.engines.sources import ModelSource, unique_sources
from app.models import catalog as model_catalog
from storage import NewDocument
from ui.services.attachments import DocumentReading, DocumentViewer, context_fit, main_sees_images
from ui.services.compare_review import ComparisonReview
from ui.services.context import ControllerContext
from ui.services.conversation_actions import ConversationActions
from ui.widgets.compare.compare_view import MIN_PANES, ComparePane, CompareView
from ui.widgets.settings.chat_settings import CHAT_NAMES, ChatSettingsDialog

log = logging.getLogger(__name__)



class CompareController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.window = ctx.window
        self.repo = ctx.repo
        self.catalog = ctx.catalog
        self.models_dir = ctx.models_dir
        self.actions = ConversationActions(ctx)
        # the files attached in a comparison's composer
        self.reading = DocumentReading(ctx.gui, context_fit(ctx), main_sees_images(ctx))
        self.viewer = DocumentViewer(ctx)  # a pane's document and citation chips open here
        self.router = ctx.engines.router
        self.states: dict[int, ComparisonState] = {}  # open comparisons
        self.remote_models: list[tuple[str, str]] = []  # (base URL, model) used this session
        self.known_sources: dict[str, ModelSource] = {}  # every source a pane offers, by key
        self.review = ComparisonReview(ctx, self.states)
        self.settings_dialog: ChatSettingsDialog | None = None  # a pane's, the one open if any
        w = self.window
        for signal, slot in (
            (w.new_comparison_requested, lambda: self.new_comparison()),
            (w.leaderboard_requested, lambda: self.review.show_leaderboard()),
            (w.open_comparison_requested, self.open_comparison), (w.comparison_closed, self._closed),
            (w.rename_comparison_requested, self.rename), (w.delete_comparison_requested, self.delete),
            (w.undo_comparison_delete_requested, self.restore), (w.tab_closed, self.router.release),
            (ctx.engine_signals.pool_state_changed, self.on_engine_state),
        ):
            signal.connect(slot)

    # ----- engines -------------------------------------------------------------------

    def on_engine_state(self, source: ModelSource, state: EngineState) -> None:
        """A pool engine's state: the panes on that model say it."""
        text = {EngineStatus.STARTING: f"loading {source.label}…", EngineStatus.READY: f"{source.label} ready",
                EngineStatus.FAILED: f"{source.label} failed: {state.error}"}.get(state.status)
        if text is not None:
            self._show_engine_state(source, text)

    def _show_engine_state(self, source: ModelSource, text: str) -> None:
        for comparison_id, state in self.states.items():
            view = self.window.compare_for(comparison_id)
            for conv_id, pane_source in state.sources.items():
                pane = view.pane_for(conv_id) if view is not None else None
                if pane is not None and pane_source.key == source.key and not pane.busy:
                    pane.set_state(text)

    # ----- creating and opening ------------------------------------------------------

    def new_comparison(self, panes: int = MIN_PANES, sources: list[ModelSource] | None = None) -> asyncio.Task:
        """A comparison of `panes` panes, on the main model unless sources are given, each
        starting from the preset chosen in the sidebar."""
        main = self.ctx.engines.main_source()
        chosen = sources or [main] * panes
        preset_id = self.window.selected_preset()

        def work():
            preset = self.catalog.get_preset(preset_id) if preset_id is not None else None
            convs = [
                self.repo.create_conversation(model_ref=s.key, preset_id=preset_id,
                                              sampling=preset.sampling if preset else None)
                for s in chosen
            ]
            state = ComparisonState({c.id: s for c, s in zip(convs, chosen)}, [c.id for c in convs])
            record = self.catalog.create_comparison("", [c.id for c in convs], state.to_settings())
            return self._load(record.id)

        return self.ctx.storage.run(work, self._show)

    def open_comparison(self, comparison_id: int) -> asyncio.Task:
        return self.ctx.storage.run(lambda: self._load(comparison_id), self._show)

    def _load(self, comparison_id: int) -> dict:
        """Everything a compare view needs, read on the storage thread."""
        record = self.catalog.get_comparison(comparison_id)
        alive = [i for i in record.conversation_ids if not self.repo.get_conversation(i).deleted]
        state = ComparisonState.from_settings(record.settings, tuple(alive), self.ctx.engines.main_source())
        return {
            "record": record,
            "state": state,
            "paths": {i: self.repo.active_path(i) for i in alive},
            "presets": [(p.id, p.name) for p in self.catalog.list_presets()],
            "choices": self._source_choices(state),
        }

    def _source_choices(self, state: ComparisonState) -> list[ModelSource]:
        sources = [self.ctx.engines.main_source()]
        if self.models_dir is not None:
            for spec in model_catalog.CATALOG.values():
                if model_catalog.is_installed(spec, self.models_dir):
                    sources.append(ModelSource.local(model_catalog.model_path(spec, self.models_dir)))
        sources += [ModelSource.local(p) for p in self.catalog.get_setting(RECENT_MODELS_SETTING, [])]
        sources += [ModelSource.remote(url, model) for url, model in self.remote_models]
        sources += list(state.sources.values())
        return unique_sources(sources)

    def _show(self, loaded: dict) -> None:
        record, state = loaded["record"], loaded["state"]
        view, made = self.window.open_compare(record.id, record.title)  # untitled until the first send
        if not made:
            return
        self.states[record.id] = state
        self._wire(view)
        for conv_id in state.order:
            self._add_pane(view, conv_id, loaded["paths"][conv_id], loaded["choices"], loaded["presets"])
        view.set_blind(state.blind, state.favourite)
        view.set_order(state.order)
        self.review.show_agreement(view)

    def _add_pane(self, view: CompareView, conv_id: int, path, choices, presets) -> ComparePane:
        state = self.states[view.comparison_id]
        source = state.sources[conv_id]
        pane = view.add_pane(conv_id, path.conversation.title)
        delegate = pane.view.delegate
        delegate.document_clicked.connect(lambda sha256, name, p=pane: self.viewer.show_document(p, sha256, name))
        delegate.source_clicked.connect(lambda source, p=pane: self.viewer.show_source(p, source))
        delegate.image_clicked.connect(lambda sha256, name, p=pane: self.viewer.show_image(p, sha256, name))
        self.ctx.thumbnails.wire(delegate, pane.view)
        self.known_sources.update((s.key, s) for s in choices)
        pane.set_source_choices([(s.key, s.label) for s in choices], source.key)
        pane.set_presets(presets, path.conversation.preset_id)
        pane.lock_preset(bool(path.messages))
        self.actions.show_path(pane, path)
        last = path.messages[-1] if path.messages else None
        if last is not None and last.role == "assistant":
            pane.set_result(reply_stats(last))
        if source.key != self.ctx.engines.main_source().key:
            self.router.engine_for(conv_id, source)  # load it now, not on the first send
        return pane

    def _wire(self, view: CompareView) -> None:
        view.send_requested.connect(lambda text, documents, v=view: self.send(v, text, documents))
        view.composer_box.tray.extraction_requested.connect(self.reading.read)
        view.composer_box.tray.image_requested.connect(self.viewer.show_chip_image)
        view.composer_box.tray.thumbnail_requested.connect(self.reading.thumbnail)
        view.stop_requested.connect(lambda v=view: self.stop(v))
        view.regenerate_requested.connect(lambda v=view: self.regenerate(v))
        view.branch_requested.connect(
            lambda conv_id, message_id, step, v=view: self.actions.switch_branch(v.pane_for(conv_id), message_id, step))
        view.add_pane_requested.connect(lambda v=view: self.add_pane(v))
        view.remove_pane_requested.connect(lambda conv_id, v=view: self.remove_pane(v, conv_id))
        view.source_chosen.connect(lambda conv_id, key, v=view: self.set_source_key(v, conv_id, key))
        view.source_file_chosen.connect(
            lambda conv_id, path, v=view: self.set_source(v, conv_id, ModelSource.local(path)))
        view.source_remote_chosen.connect(
            lambda conv_id, url, model, key, v=view: self._remote_chosen(v, conv_id, url, model, key))
        view.preset_chosen.connect(lambda conv_id, preset_id: self.set_preset(conv_id, preset_id))
        view.settings_requested.connect(self.edit_chat_settings)
        view.continue_requested.connect(self.continue_with)
        view.favourite_picked.connect(lambda conv_id, v=view: self.review.pick_favourite(v, conv_id))
        view.blind_toggled.connect(lambda blind, v=view: self.review.set_blind(v, blind))
        view.diff_requested.connect(lambda v=view: self.review.show_differences(v))
        view.all_done.connect(lambda v=view: self.review.show_agreement(v))
        view.export_requested.connect(lambda path, v=view: self.review.export_markdown(v, path))

    # ----- panes ---------------------------------------------------------------------

    def add_pane(self, view: CompareView) -> asyncio.Task:
        state = self.states[view.comparison_id]
        source = self.ctx.engines.main_source()

        def work():
            conv = self.repo.create_conversation(model_ref=source.key)
            self.repo.update_conversation(conv.id, comparison_id=view.comparison_id)
            state.add(conv.id, source)
            self.catalog.update_comparison(view.comparison_id, settings=state.to_settings())
            presets = [(p.id, p.name) for p in self.catalog.list_presets()]
            return self.repo.active_path(conv.id), self._source_choices(state), presets

        def show(result) -> None:
            path, choices, presets = result
            self._add_pane(view, path.conversation.id, path, choices, presets)
            view.set_blind(state.blind, state.favourite)

        return self.ctx.storage.run(work, show)

    def remove_pane(self, view: CompareView, conv_id: int) -> asyncio.Task:
        """The pane's conversation is deleted like a chat (restorable for a day)."""
        state = self.states[view.comparison_id]
        self.router.release(conv_id)
        view.remove_pane(conv_id)

        def work():
            state.remove(conv_id)
            self.repo.delete(conv_id)
            self.catalog.update_comparison(view.comparison_id, settings=state.to_settings())

        return self.ctx.storage.run(work, lambda _none: self.review.show_agreement(view))

    def set_source_key(self, view: CompareView, conv_id: int, key: str) -> asyncio.Task | None:
        source = self.known_sources.get(key)
        return self.set_source(view, conv_id, source) if source is not None else None

    def _remote_chosen(self, view: CompareView, conv_id: int, url: str, model: str, key: str) -> None:
        source = ModelSource.remote(url, model)
        if key:
            self.router.remote_keys[source.base_url] = key
        if (source.base_url, source.model) not in self.remote_models:
            self.remote_models.append((source.base_url, source.model))
        self.set_source(view, conv_id, source)

    def set_source(self, view: CompareView, conv_id: int, source: ModelSource) -> asyncio.Task | None:
        state = self.states[view.comparison_id]
        if state.sources.get(conv_id) == source:
            return None
        state.sources[conv_id] = source
        self.known_sources[source.key] = source
        view.pane_for(conv_id).set_source(source.key, source.label)
        self.router.release(conv_id)
        if source.key != self.ctx.engines.main_source().key:
            self.router.engine_for(conv_id, source)

        def work():
            self.repo.update_conversation(conv_id, model_ref=source.key)
            self.catalog.update_comparison(view.comparison_id, settings=state.to_settings())

        return self.ctx.storage.run(work)

    def edit_chat_settings(self, conv_id: int) -> asyncio.Task:
        """A pane's sampling settings (a chat tab edits them in its side panel) in a
        window-modal dialog, saved with the conversation when accepted. open(), not exec():
        a nested event loop inside this task would stop qasync from running every other task
        while the dialog is up."""
        repo, catalog = self.repo, self.catalog

        def load():
            conv = repo.get_conversation(conv_id)
            preset = catalog.get_preset(conv.preset_id) if conv.preset_id else None
            return conv, preset

        def show(loaded) -> None:
            conv, preset = loaded
            defaults = {name: getattr(self.ctx.sampling, name) for name in CHAT_NAMES}
            dialog = ChatSettingsDialog(conv.title, conv.sampling, defaults, preset.name if preset else None,
                                        self.window)
            dialog.accepted.connect(lambda: self._save_sampling(conv_id, {**conv.sampling, **dialog.values()}))
            dialog.finished.connect(dialog.deleteLater)
            self.settings_dialog = dialog
            dialog.open()

        return self.ctx.storage.run(load, show)

    def _save_sampling(self, conv_id: int, sampling: dict) -> asyncio.Task:
        return self.ctx.storage.run(lambda: self.repo.update_conversation(conv_id, sampling=sampling))

    def set_preset(self, conv_id: int, preset_id: int | None) -> asyncio.Task:
        def work():
            preset = self.catalog.get_preset(preset_id) if preset_id is not None else None
            self.repo.update_conversation(conv_id, preset_id=preset_id, sampling=preset.sampling if preset else {})

        return self.ctx.storage.run(work)

    # ----- talking -------------------------------------------------------------------

    def send(self, view: CompareView, text: str, documents: Sequence[NewDocument] = ()) -> asyncio.Task | None:
        """The same message (and the documents attached) to every pane; each replies on its own
        model and settings."""
        panes = [p for p in view.panes() if self.ctx.streams.stream_for(p.conversation_id) is None]
        if not panes:
            return None
        conv_ids = [p.conversation_id for p in panes]
        sources = self.states[view.comparison_id].sources
        labels = {c: s.label for c, s in sources.items()}
        on_main = {c for c, s in sources.items() if s.key == self.ctx.engines.main_source().key}
        for pane in panes:
            pane.set_busy(True)
            pane.lock_preset(True)

        def work():
            started = []
            for conv_id in conv_ids:
                conv = self.repo.get_conversation(conv_id)
                system = None
                if conv.preset_id is not None and not self.repo.active_path(conv_id).messages:
                    system = self.catalog.get_preset(conv.preset_id).system_prompt or None
                    if system and conv_id in on_main:  # every pane on the main model starts from its cells
                        self.ctx.engines.engine.pin_system_prompt(system)
                # The reply records the pane's model as the pane names it.
                session = ConversationSession(self.repo, conv_id, partial(_label, labels.get(conv_id)))
                reply = session.send(text, documents, system=system)
                started.append((conv_id, reply.path, reply.reply, self.actions.prompt_for(reply.path, reply.reply)))
            record = self.catalog.get_comparison(view.comparison_id)
            if not record.title:
                self.catalog.update_comparison(view.comparison_id, title=stand_in_title(text))
            return started

        def start(started) -> None:
            if not view.title:
                self.window.set_tab_title(view, stand_in_title(text))
            for conv_id, path, reply, prompt in started:
                pane = view.pane_for(conv_id)
                if pane is not None:
                    pane.set_result("")
                    self.actions.start_reply(pane, path, reply, prompt=prompt)
            self.ctx.events.conversations_changed.emit()

        return self.ctx.storage.run(work, start)

    def regenerate(self, view: CompareView) -> list:
        """A new answer to the last message in every pane, on each pane's model."""
        started = []
        for pane in view.panes():
            pane.set_result("")
            started.append(self.actions.regenerate(pane))
        return started

    def stop(self, view: CompareView) -> None:
        for pane in view.panes():
            self.actions.stop(pane)

    def continue_with(self, conv_id: int) -> asyncio.Task:
        """The pane's conversation goes on as a normal chat tab (a copy: the comparison
        stays as it was); it keeps the pane's model."""
        def work():
            conv = self.repo.get_conversation(conv_id)
            return self.repo.copy_active_path(conv_id, title=conv.title or "Continued from a comparison")

        return self.ctx.storage.run(work, lambda copy: (self.window.open_requested.emit(copy.id),
                                                          self.ctx.events.conversations_changed.emit()))

    # ----- the sidebar ----------------------------------------------------------------

    def rename(self, comparison_id: int, title: str) -> asyncio.Task:
        def shown(_none) -> None:
            view = self.window.compare_for(comparison_id)
            if view is not None:
                self.window.set_tab_title(view, title)
            self.ctx.events.conversations_changed.emit()

        return self.ctx.storage.run(lambda: self.catalog.update_comparison(comparison_id, title=title), shown)

    def delete(self, comparison_id: int) -> asyncio.Task:
        """Its conversations are soft-deleted together; Undo brings them all back."""
        view = self.window.compare_for(comparison_id)
        if view is not None:
            self.stop(view)
            self.window.tabs.removeTab(self.window.tabs.indexOf(view))
            self._closed(comparison_id)
            view.deleteLater()

        def work():
            record = self.catalog.get_comparison(comparison_id)
            for conv_id in record.conversation_ids:
                self.repo.delete(conv_id)
            return record

        def done(record) -> None:
            self.window.offer_undo_delete(comparison_id, record.title or "Comparison", comparison=True)
            self.ctx.events.conversations_changed.emit()

        return self.ctx.storage.run(work, done)

    def restore(self, comparison_id: int) -> asyncio.Task:
        def work():
            for conv_id in self.catalog.get_comparison(comparison_id).conversation_ids:
                self.repo.restore(conv_id)

        return self.ctx.storage.run(work, lambda _none: self.ctx.events.conversations_changed.emit())

    def _closed(self, comparison_id: int) -> None:
        state = self.states.pop(comparison_id, None)
        if state is not None:
            for conv_id in state.sources:
                self.router.release(conv_id)

    def shutdown(self) -> None:
        self.reading.shutdown()
        self.review.shutdown()


def _label(label: str | None, _conversation: object) -> str | None:
    return label
