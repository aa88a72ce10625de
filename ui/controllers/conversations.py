"""The sidebar and the chat tabs: listing and searching conversations, opening, creating,
renaming, pinning, filing in folders, deleting (with Undo) and restoring them."""

from __future__ import annotations

import asyncio

from app.engines.sources import source_of
from storage import API_ORIGIN, ConversationRecord, discard_unused, matching_messages, search
from ui.services.context import ControllerContext
from ui.services.conversation_actions import ConversationActions
from ui.widgets.window.conversation_list import API_GROUP, ConversationItem

# Chat folders: a conversation id -> its folder's name, kept in the settings table (a folder
# is a name the sidebar groups under, nothing more, so it needs no table of its own).
FOLDERS_SETTING = "chat_folders"
# The API's conversations listed at most (newest first): a batch may store thousands, and
# the sidebar is a list of what a user reads, not an archive browser.
API_LISTED = 100


class ConversationsController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.actions = ConversationActions(ctx)
        self.query = ""  # what the search box holds: the sidebar shows its results until cleared
        self._reopen_on_undo: set[int] = set()  # deleted with their tab open
        w = ctx.window
        w.new_chat_requested.connect(self.new_chat)
        w.open_requested.connect(self.open_conversation)
        w.open_match_requested.connect(self.open_match)
        w.search_changed.connect(self.search)
        w.rename_requested.connect(self.rename)
        w.pin_requested.connect(self.set_pinned)
        w.conversation_list.folder_requested.connect(self.set_folder)
        w.delete_requested.connect(self.delete)
        w.undo_delete_requested.connect(self.restore)
        w.tab_closed.connect(self.discard_if_unused)
        ctx.events.conversations_changed.connect(self.refresh)

    # ----- the sidebar ------------------------------------------------------------------

    def refresh(self) -> asyncio.Task:
        """Every chat and comparison, pinned first, newest first, then the conversations the
        server's clients had (stored Responses); or the search's hits."""
        if self.query.strip():
            return self._show_hits(self.query)
        repo, catalog = self.ctx.repo, self.ctx.catalog

        def items():
            folders = self._folders()

            def item(c: ConversationRecord, from_api: bool = False) -> tuple:
                return c.updated_at, ConversationItem(c.id, c.title, c.pinned, updated_at=c.updated_at,
                                                      folder=folders.get(c.id, ""), from_api=from_api)

            chats = [item(c) for c in repo.list_conversations(standalone_only=True, include_unused=False)]
            api = [item(c, from_api=True) for c in repo.list_conversations(origin=API_ORIGIN, limit=API_LISTED)]
            api_unlisted = repo.count_conversations(API_ORIGIN) - len(api) if len(api) == API_LISTED else 0
            comparisons = [(c.updated_at, ConversationItem(c.id, c.title, comparison=True,
                                                           updated_at=c.updated_at or c.created_at))
                           for c in catalog.list_comparisons()]
            newest = [item for _, item in sorted(chats + api + comparisons, key=lambda pair: pair[0], reverse=True)]
            return sorted(newest, key=_sidebar_place), api_unlisted  # stable: newest first within each place

        def show(found: tuple[list[ConversationItem], int]) -> None:
            listed, api_unlisted = found
            self.ctx.window.set_conversations(listed, api_unlisted=api_unlisted)

        return self.ctx.storage.run(items, show)

    def _folders(self) -> dict[int, str]:
        """Read on the storage thread."""
        return {int(ident): name for ident, name in (self.ctx.catalog.get_setting(FOLDERS_SETTING) or {}).items()}

    def set_folder(self, conversation_id: int, folder: str) -> asyncio.Task:
        """Files the chat in the folder ("" takes it out); a folder is there while it holds a chat."""
        def work() -> None:
            folders = {str(ident): name for ident, name in self._folders().items() if ident != conversation_id}
            if folder:
                folders[str(conversation_id)] = folder
            self.ctx.catalog.set_setting(FOLDERS_SETTING, folders)

        return self.ctx.storage.run(work, lambda _none: self.refresh())

    def search(self, text: str) -> asyncio.Task:
        self.query = text
        return self.refresh()

    def _show_hits(self, text: str) -> asyncio.Task:
        db = self.ctx.repo.db

        def hits():
            seen, items = set(), []
            for hit in search(db, text, limit=50, origin=None):
                if hit.conversation_id not in seen:
                    seen.add(hit.conversation_id)
                    # Words found in an attached document, a conversation of the API's: the hit says so.
                    where = ((f"in {hit.document_name}: ", False),) if hit.document_name else ()
                    source = ((f"{API_GROUP}: ", False),) if hit.origin == API_ORIGIN else ()
                    snippet = (*source, *where, *hit.snippet)
                    items.append(ConversationItem(hit.conversation_id, hit.conversation_title,
                                                  subtitle="".join(t for t, _ in snippet), snippet=snippet,
                                                  from_api=hit.origin == API_ORIGIN))
            return items

        def show(items) -> None:
            if text == self.query:  # an answer to an older query is dropped
                self.ctx.window.set_conversations(items, text)

        return self.ctx.storage.run(hits, show)

    def rename(self, conversation_id: int, title: str) -> asyncio.Task:
        def shown(conv) -> None:
            tab = self.ctx.window.tab_for(conversation_id)
            if tab is not None:
                self.ctx.window.set_tab_title(tab, conv.title)
            self.refresh()

        return self.ctx.storage.run(lambda: self.ctx.repo.rename(conversation_id, title), shown)

    def set_pinned(self, conversation_id: int, pinned: bool) -> asyncio.Task:
        return self.ctx.storage.run(lambda: self.ctx.repo.update_conversation(conversation_id, pinned=pinned),
                                    lambda _conv: self.refresh())

    def delete(self, conversation_id: int) -> asyncio.Task:
        """Soft delete, undoable from the status bar; a reply being written is stopped."""
        stream = self.ctx.streams.stream_for(conversation_id)
        if stream is not None:
            stream.engine.cancel(stream.request_id)
        if self.ctx.window.tab_for(conversation_id) is not None:
            self._reopen_on_undo.add(conversation_id)
        self.ctx.window.close_tab_of(conversation_id)
        repo = self.ctx.repo

        def work():
            conv = repo.get_conversation(conversation_id)
            repo.delete(conversation_id)
            return conv

        def done(conv) -> None:
            self.ctx.window.offer_undo_delete(conversation_id, conv.title)
            self.refresh()

        return self.ctx.storage.run(work, done)

    def restore(self, conversation_id: int) -> asyncio.Task:
        """Undo of a delete: back in the sidebar, and in its tab if it had one open."""
        def done(_none) -> None:
            self.refresh()
            if conversation_id in self._reopen_on_undo:
                self._reopen_on_undo.discard(conversation_id)
                self.open_conversation(conversation_id)

        return self.ctx.storage.run(lambda: self.ctx.repo.restore(conversation_id), done)

    # ----- tabs -------------------------------------------------------------------------

    def discard_if_unused(self, conversation_id: int) -> asyncio.Task:
        """A chat closed with nothing sent in it is not kept. A message on its way is: the
        storage thread stores it before it gets here."""
        return self.ctx.storage.run(lambda: discard_unused(self.ctx.repo.db, only=[conversation_id]))

    def new_chat(self, preset_id: int | None | object = ...) -> asyncio.Task:
        """A new tab; with a preset, its system prompt opens the chat and is pinned in the
        engine, so every tab using that preset starts from the same cached cells."""
        chosen = self.ctx.window.selected_preset() if preset_id is ... else preset_id
        repo, catalog, engines = self.ctx.repo, self.ctx.catalog, self.ctx.engines
        model_name = engines.model_name

        def work():
            preset = catalog.get_preset(chosen) if chosen is not None else None
            conv = repo.create_conversation(model_ref=model_name, preset_id=chosen,
                                            sampling=preset.sampling if preset else None)
            if preset and preset.system_prompt:
                repo.add_message(conv.id, "system", preset.system_prompt)
                engines.engine.pin_system_prompt(preset.system_prompt)
            return conv

        def show(conv) -> None:
            self._open_tab(conv.id, conv.title)
            self.open_conversation(conv.id)
            self.refresh()

        return self.ctx.storage.run(work, show)

    def open_conversation(self, conversation_id: int) -> asyncio.Task:
        """Its tab; a conversation that is a pane of a comparison opens the comparison."""
        return self.ctx.storage.run(lambda: self.ctx.repo.active_path(conversation_id), self._show)

    def open_match(self, conversation_id: int, words: str) -> asyncio.Task:
        """A search hit: its tab, scrolled to the first message on screen the words match
        (a hit on the title or on another branch opens as any chat does)."""
        repo = self.ctx.repo

        def work():
            return repo.active_path(conversation_id), matching_messages(repo.db, words, conversation_id)

        def show(found) -> None:
            path, matches = found
            tab = self._show(path)
            if tab is not None:
                # A hit on a tool's result: the reply whose chip holds it, that chip opened.
                tab.view.open_calls([c.call_id for v in tab.model.views() for c in v.calls if c.result_id in matches])
                tab.view.show_first(lambda view: view.message_id in matches
                                    or any(c.result_id in matches for c in view.calls))

        return self.ctx.storage.run(work, show)

    def _show(self, path):
        """The path in its tab (returned), or its comparison opened (None)."""
        conversation = path.conversation
        if conversation.comparison_id is not None:
            self.ctx.window.open_comparison_requested.emit(conversation.comparison_id)
            return None
        tab = self._open_tab(conversation.id, conversation.title)
        self.actions.show_path(tab, path)
        source = source_of(conversation.model_ref)
        if source is not None and not self.actions.is_writing(conversation.id):
            tab.set_state(f"on {source.label}")  # a chat with a model of its own says which
        return tab

    def _open_tab(self, conversation_id: int, title: str):
        known = self.ctx.window.tab_for(conversation_id) is not None
        tab = self.ctx.window.open_tab(conversation_id, title)
        if not known:
            self.ctx.events.tab_opened.emit(tab)
        return tab


def _sidebar_place(item: ConversationItem) -> tuple[int, str]:
    """Pinned chats first, then each folder by its name, then the rest by date, then the
    API's conversations (each of which a pin or a folder brings up like any chat)."""
    if item.pinned:
        return 0, ""
    if item.folder:
        return 1, item.folder.lower()
    return (3, "") if item.from_api else (2, "")
