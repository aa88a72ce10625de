"""The rows a user's action on one conversation writes: send, regenerate, edit and resend,
continue, branch out, and a tool round's turns (the calls a reply made, each call's result,
the calls a stop left without one). Plain synchronous calls over a ChatRepository, so the
window runs them on its storage thread and the terminal calls them directly."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.chats.titles import stand_in_title
from app.documents import DocumentPrompt
from app.engines.finish import message_status
from app.tools.history import call_records, not_run_record, result_record
from app.tools.types import ToolCall
from inference import Delta, FinishReason
from storage import (
    ActivePath,
    ChatRepository,
    ConversationRecord,
    MessageRecord,
    MessageStatus,
    NewDocument,
    ToolResultRecord,
)

if TYPE_CHECKING:  # the loop's events; the machine's module loads the MCP types
    from app.tools.machine import CallFinished, Stopped, TurnDone


def cut_short(reply: MessageRecord) -> bool:
    """A reply stopped (by the user, or a crash) after some text: it can be continued, as one
    cut at the token limit can."""
    return reply.status in (MessageStatus.STOPPED, MessageStatus.INTERRUPTED) and bool(reply.content)


@dataclass(frozen=True)
class ReplyStart:
    """A reply whose row exists, ready to stream: the branch it ends (path.messages[-1] is
    the reply itself) and the reply's row."""

    path: ActivePath
    reply: MessageRecord


class ConversationSession:
    """One open conversation's use-cases, and what is kept about it beyond its rows while it
    is open. model_label: the model name a new reply row records, for the conversation as it
    is stored."""

    def __init__(self, repo: ChatRepository, conversation_id: int,
                 model_label: Callable[[ConversationRecord], str | None]) -> None:
        self.repo = repo
        self.conversation_id = conversation_id
        self.model_label = model_label
        # Its last prompt that had documents (the side panel's document tokens).
        self.last_prompt: DocumentPrompt | None = None
        # Between a reply's turns: what its tool round waits on ("running add").
        self.waiting_on: str | None = None
        # Its replies that called tools, by message id: the calls as the model wrote them
        # (storage keeps the calls, not that text), so the next turn's prompt shows them
        # token for token and finds them in the KV. This run only.
        self.call_texts: dict[int, str] = {}

    @classmethod
    def create(cls, repo: ChatRepository, model_label: Callable[[ConversationRecord], str | None], title: str,
               like: ConversationRecord | None = None, system: str | None = None) -> ConversationSession:
        """An empty chat titled title, on the model, preset and settings of like (if given),
        opening with the system prompt: "ask each line"'s chats, sent to once their tabs
        open."""
        conv = repo.create_conversation(title=title, model_ref=like.model_ref if like else None,
                                        preset_id=like.preset_id if like else None,
                                        sampling=like.sampling if like else None)
        if system:
            repo.add_message(conv.id, "system", system)
        return cls(repo, conv.id, model_label)

    @classmethod
    def open(cls, repo: ChatRepository, text: str, documents: Sequence[NewDocument] = (),
             system: str | None = None, model: str | None = None,
             label: str | None = None) -> tuple[ConversationSession, MessageRecord]:
        """A new chat from its first message (after the system prompt, if any): the chat, its
        stand-in title and the message with its documents in one transaction (a kill while a
        large file is stored leaves nothing half made); no reply yet. model: the chat's model
        as it records it (a remote server's source key); label: as its replies record it,
        when not the same."""
        opening = ([("system", system)] if system else []) + [("user", text)]
        conv, user = repo.start_conversation(opening, documents, title=stand_in_title(text),
                                             title_provisional=True, model_ref=model)
        recorded = label or model
        return cls(repo, conv.id, lambda _conv: recorded), user

    @classmethod
    def start(cls, repo: ChatRepository, text: str, documents: Sequence[NewDocument] = (),
              system: str | None = None, model: str | None = None,
              label: str | None = None) -> tuple[ConversationSession, ReplyStart]:
        """A new chat as open makes it, then the reply to start."""
        session, user = cls.open(repo, text, documents, system, model, label)
        return session, session.reply_after(user.id)

    def send(self, text: str, documents: Sequence[NewDocument] = (), system: str | None = None) -> ReplyStart:
        """The user's message (as ask stores it) and an empty reply to it."""
        return self.reply_after(self.ask(text, documents, system).id)

    def ask(self, text: str, documents: Sequence[NewDocument] = (), system: str | None = None) -> MessageRecord:
        """The user's message with its documents, no reply yet (the terminal's tool loop
        stores each turn as it ends); an untitled chat gets a stand-in title until the
        model's comes. system: the prompt an empty chat begins with (a compare pane's
        preset), written first."""
        repo, conv_id = self.repo, self.conversation_id
        if system and not repo.active_path(conv_id).messages:
            repo.add_message(conv_id, "system", system)
        user = repo.add_message(conv_id, "user", text, documents=tuple(documents))
        if not repo.get_conversation(conv_id).title:
            repo.rename(conv_id, stand_in_title(text), provisional=True)
        return user

    def regenerate(self, message_id: int | None = None) -> ReplyStart | None:
        """Another answer to the last question, or beside the reply message_id: a new
        branch, the old one stays. None when there is nothing to answer."""
        path = self.repo.active_path(self.conversation_id)
        if not path.messages:
            return None
        last = next((m for m in path.messages if m.id == message_id), None) if message_id else path.messages[-1]
        if last is None:
            return None
        parent = last.parent_id if last.role == "assistant" else last.id
        return self._reply_to(parent, path.conversation)

    def edit(self, message_id: int, text: str) -> ReplyStart:
        """A new sibling of an earlier user message, and a reply to it; the old branch stays."""
        edited = self.repo.edit_message(message_id, text)
        return self._reply_to(edited.id, self.repo.get_conversation(self.conversation_id))

    def continue_reply(self) -> ReplyStart | None:
        """The last reply back to streaming, to grow from its text; None unless the branch
        ends in a reply that ended with text: complete (cut at the token limit), stopped by the
        user, or interrupted (a crash)."""
        path = self.repo.active_path(self.conversation_id)
        last = path.messages[-1] if path.messages else None
        if last is None or last.role != "assistant" or not (
                (last.status is MessageStatus.COMPLETE and last.content) or cut_short(last)):
            return None
        resumed = self.repo.resume_reply(last.id)
        return ReplyStart(self.repo.active_path(self.conversation_id), resumed)

    def branch(self, message_id: int) -> ConversationRecord:
        """A new chat holding this one's branch down to message_id."""
        title = self.repo.get_conversation(self.conversation_id).title or "Chat"
        return self.repo.copy_active_path(self.conversation_id, title=f"{title} (branch)", up_to=message_id)

    def reply_after(self, parent_id: int) -> ReplyStart:
        """An empty reply under message parent_id: the next turn of a tool round, after the
        results of the calls."""
        return self._reply_to(parent_id, self.repo.get_conversation(self.conversation_id))

    def _reply_to(self, parent_id: int | None, conv: ConversationRecord) -> ReplyStart:
        reply = self.repo.start_reply(self.conversation_id, parent_id=parent_id, model=self.model_label(conv))
        return ReplyStart(self.repo.active_path(self.conversation_id), reply)

    def active_path(self) -> ActivePath:
        """Its branch as it is stored now."""
        return self.repo.active_path(self.conversation_id)

    # ----- a tool round's rows (app/tools/machine.py's events, as storage keeps them) --------------

    def record_calls(self, reply_id: int, calls: Sequence[ToolCall], written: str, prose: str = "") -> MessageRecord:
        """A streamed reply that ended as calls (the window reads them after it ended): its
        calls kept, its text the prose it wrote before them (empty when it only called);
        written: its whole text as the model wrote it, kept by the session this run for the
        next turn's prompt."""
        self.call_texts[reply_id] = written
        return self.repo.set_tool_calls(reply_id, call_records(calls), prose)

    def record_turn(self, turn: TurnDone) -> MessageRecord:
        """A whole turn the terminal's loop streamed, at the end of the branch: its text or
        its calls, its status and stats, under the model the chat's replies record."""
        last = turn.last
        model = self.model_label(self.repo.get_conversation(self.conversation_id))
        return self.repo.add_message(self.conversation_id, "assistant", turn.text,
                                     status=message_status(last.finish_reason or FinishReason.ERROR), model=model,
                                     tool_calls=call_records(turn.calls), **_stats(last))

    def record_result(self, finished: CallFinished, after: int | None = None) -> MessageRecord:
        """A call's result (or its denial) as the "tool" row after message after (None: the
        end of the branch), its text as the model read it."""
        from app.tools.machine import result_content  # loaded with the loop that made finished

        return self._add_tool_row(result_content(finished.result),
                                  result_record(finished.call, finished.result, finished.denied), after)

    def record_unanswered(self, stopped: Stopped, after: int) -> MessageRecord | None:
        """The calls a stopped loop left, each a "tool" row in order after message after: its
        result where one came (held behind an earlier call's), else what says it was stopped
        while it ran or never ran; the last row, None when there were none."""
        last = None
        for call, ran_s, finished in stopped.left():
            if finished is not None:
                last = self.record_result(finished, after if last is None else last.id)
                continue
            text, record = not_run_record(call, ran_s)
            last = self._add_tool_row(text, record, after if last is None else last.id)
        return last

    def _add_tool_row(self, text: str, record: ToolResultRecord, after: int | None) -> MessageRecord:
        where: dict[str, Any] = {} if after is None else {"parent_id": after}  # none: the active leaf
        return self.repo.add_message(self.conversation_id, "tool", text, tool_result=record, **where)


def _stats(delta: Delta) -> dict[str, Any]:
    """A turn's final delta as the stats its row keeps."""
    s = delta.stats
    fields: dict[str, Any] = {"error_text": delta.error}
    if s is not None:
        fields |= {"prompt_tokens": s.prompt_tokens, "completion_tokens": s.generated_tokens,
                   "ttft_s": s.ttft_s, "tokens_per_s": s.decode_tok_s}
    return fields
