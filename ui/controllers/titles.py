"""Chat titles the model writes once a chat's first reply is done.

Until then a new chat shows its first message's words, stored as a provisional title. When
a reply of a chat whose title is still provisional ends, the chat's own engine is asked
for a title at spare priority (it runs only when no tab needs the room: inference/
scheduler.py), with its deltas kept out of every view (registered in the app's delta router). The
cleaned title (app/chats/titles.py) replaces the provisional one in one storage step that
does nothing if the user renamed the chat meanwhile; a chat is titled once. Replies to the
HTTP server are not chats of the window and never get here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from app.chats.titles import make_title, title_request
from inference import Delta, FinishReason, new_request_id
from storage import ConversationRecord
from ui.services.context import ControllerContext
from ui.services.stream_presenter import Stream

log = logging.getLogger(__name__)


@dataclass(eq=False)
class TitleJob:
    conversation_id: int
    first_message: str
    reply: str
    parts: list[str] = field(default_factory=list)  # the model's output so far (reader thread)


class TitlesController:
    def __init__(self, ctx: ControllerContext, enabled: bool = True) -> None:
        self.ctx = ctx
        self.enabled = enabled
        self._busy: set[int] = set()  # conversations whose title is on its way (GUI thread)
        ctx.streams.reply_finished.connect(self._reply_finished)

    def _reply_finished(self, stream: Stream, delta: Delta) -> None:
        conv_id = stream.conversation_id
        if not self.enabled or conv_id in self._busy or delta.finish_reason is FinishReason.ERROR:
            return
        # The reply's text as held here: its final save may still be queued behind this read.
        reply, message_id, repo = stream.reply.text(), stream.message_id, self.ctx.repo

        def load() -> tuple[ConversationRecord, str, str] | None:
            conv = repo.get_conversation(conv_id)
            if not conv.title_provisional or conv.comparison_id is not None:
                return None  # titled already, renamed by the user, or a compare pane
            messages = repo.active_path(conv_id).messages
            first = next((m for m in messages if m.role == "user"), None)
            answer = next((m for m in messages if m.role == "assistant"), None)
            if first is None:
                return None
            return conv, first.content, reply if answer is None or answer.id == message_id else answer.content

        self._busy.add(conv_id)
        self.ctx.storage.run(load, lambda loaded: self._ask(conv_id, loaded))

    def _ask(self, conv_id: int, loaded: tuple[ConversationRecord, str, str] | None) -> None:
        if loaded is None:
            self._busy.discard(conv_id)
            return
        conv, first_message, reply = loaded
        job = TitleJob(conv_id, first_message, reply)
        request_id = new_request_id("title-")
        try:
            self.ctx.engines.engine_for(conv).stream(title_request(first_message, request_id),
                                                     lambda d: self._on_delta(job, d))
        except Exception as exc:  # no engine now: the first message's words will do
            log.info("no generated title for chat %s: %s", conv_id, exc)
            self._save(job, "")

    def _on_delta(self, job: TitleJob, delta: Delta) -> None:
        """On the engine's reader thread."""
        job.parts.append(delta.text)
        if delta.finished:
            output = "" if delta.finish_reason is FinishReason.ERROR else "".join(job.parts)
            self.ctx.gui.post(lambda: self._save(job, output))

    def _save(self, job: TitleJob, output: str) -> None:
        title = make_title(output, job.first_message, job.reply)
        if not title:
            self._busy.discard(job.conversation_id)
            return
        repo = self.ctx.repo
        self.ctx.storage.run(lambda: repo.set_generated_title(job.conversation_id, title),
                             lambda conv: self._show(job.conversation_id, conv))

    def _show(self, conv_id: int, conv: ConversationRecord | None) -> None:
        self._busy.discard(conv_id)
        if conv is None:
            return  # the user renamed it meanwhile: theirs stays
        tab = self.ctx.window.tab_for(conv_id)
        if tab is not None:
            self.ctx.window.set_tab_title(tab, conv.title)
        self.ctx.events.conversations_changed.emit()
