"""Ask each line in a new tab (Chat menu, Ctrl+Shift+Enter): the composer's lines become
questions, each in a chat of its own with the composer's documents and the chat's system
prompt and settings, all sent at once. One document, several questions, decoded in the same
batches: the documents' block is computed once and every new chat finds it cached."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from app.chats.titles import stand_in_title
from app.conversations import ConversationSession
from storage import NewDocument
from ui.services.context import ControllerContext
from ui.services.conversation_actions import ConversationActions
from ui.widgets.chat.chat_tab import ChatTab

MAX_TABS = 16  # more lines than this is a paste, not a list of questions


@dataclass(frozen=True, slots=True)
class _Question:
    text: str
    documents: tuple[NewDocument, ...]


def questions_of(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class AskLinesController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.actions = ConversationActions(ctx)
        self._waiting: dict[int, _Question] = {}  # conversation id: its question, until its tab opens
        ctx.window.ask_each_line_requested.connect(self.ask)
        ctx.events.tab_opened.connect(self._opened)

    def ask(self, view: object) -> asyncio.Task | None:
        if not isinstance(view, ChatTab):
            return None
        status = self.ctx.window.statusBar()
        tray = view.composer_box.tray
        if tray.extracting():
            status.showMessage("Wait until the files are read, then ask again", 5000)
            return None
        lines = questions_of(view.composer.toPlainText())
        if not lines:
            status.showMessage("Write one question a line to ask each in a new tab", 5000)
            return None
        if len(lines) > MAX_TABS:
            status.showMessage(f"{len(lines)} lines: at most {MAX_TABS} questions open tabs at once", 5000)
            return None
        documents = tray.ready_documents()
        repo, source_id = self.ctx.repo, view.conversation_id

        def work() -> list[int]:
            source = repo.active_path(source_id)
            first = source.messages[0] if source.messages else None
            system = first.content if first is not None and first.role == "system" else None
            label = self.ctx.engines.model_label
            return [ConversationSession.create(repo, label, stand_in_title(line), like=source.conversation,
                                               system=system).conversation_id for line in lines]

        def opened(made: list[int]) -> None:
            view.composer.clear()
            tray.clear()
            for conv_id, line in zip(made, lines):
                self._waiting[conv_id] = _Question(line, documents)
                self.ctx.window.open_requested.emit(conv_id)
            self.ctx.events.conversations_changed.emit()
            status.showMessage(f"Asked {len(made)} questions, each in its own tab", 5000)

        return self.ctx.storage.run(work, opened)

    def _opened(self, tab: object) -> None:
        if not isinstance(tab, ChatTab):
            return
        question = self._waiting.pop(tab.conversation_id, None)
        if question is not None:
            self.actions.send(tab, question.text, question.documents)
