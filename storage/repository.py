"""Conversations and their message trees: the unit-of-work API the app calls.

Every method is one transaction on its own session, so it is safe from any thread
(the GUI never calls it on its own). Results are plain dataclasses.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Final

from sqlalchemy import ColumnElement, and_, delete, func, select, update
from sqlalchemy.orm import Session, aliased

from storage import attachments, unused_chats
from storage.branches import branch_cte
from storage.database import Database
from storage.errors import NotFoundError, StorageError
from storage.records import (
    ROLES,
    ActivePath,
    BranchPosition,
    ConversationRecord,
    MessageRecord,
    MessageStatus,
    NewDocument,
    SourceRecord,
    ToolCallRecord,
    ToolResultRecord,
)
from storage.schema import CHAT_ORIGIN, Conversation, Message, utcnow
from storage.tool_use import tool_from_json, tool_to_json


class _Active(enum.Enum):
    """ACTIVE's own type: `parent_id is ACTIVE` then narrows what parent_id is otherwise."""

    ACTIVE = "active"


# parent_id default for add_message: continue the branch on screen.
ACTIVE: Final = _Active.ACTIVE

def _subtree(message_id: int):
    """The ids of a message and every message under it, in all branches (a recursive CTE)."""
    subtree = select(Message.id).where(Message.id == message_id).cte("subtree", recursive=True)
    return subtree.union_all(select(Message.id).join(subtree, Message.parent_id == subtree.c.id))


_Leaf = aliased(Message)  # a message asked whether any other message replies to it


def _path_query(leaf: int):
    """The branch from the root down to leaf, root first (one recursive query)."""
    path = branch_cte(leaf)
    return select(*_RECORD_COLUMNS).join(path, Message.id == path.c.id).order_by(path.c.depth.desc())


# MessageRecord's fields, in its order: rows of these turn into records positionally.
_RECORD_COLUMNS = (
    Message.id, Message.conversation_id, Message.parent_id, Message.role, Message.content,
    Message.status, Message.error_text, Message.prompt_tokens, Message.completion_tokens,
    Message.ttft_s, Message.tokens_per_s, Message.model, Message.created_at, Message.updated_at,
    Message.sources_json, Message.tool_json,
)


def _row_record(row) -> MessageRecord:
    """Fast path for many messages: a row of _RECORD_COLUMNS, read by position."""
    msg_id, conv_id, parent, role, content, status, error, pt, ct, ttft, tps, model, created, updated, *extra = row
    sources, tool = extra
    return MessageRecord(
        msg_id, conv_id, parent, role, content, _STATUS[status], error, pt, ct, ttft, tps, model,
        created.replace(tzinfo=timezone.utc), updated.replace(tzinfo=timezone.utc),
        attachments.sources_from_json(sources), *tool_from_json(tool),
    )


def conversation_record(c: Conversation) -> ConversationRecord:
    return ConversationRecord(
        id=c.id,
        title=c.title,
        created_at=_aware(c.created_at),
        updated_at=_aware(c.updated_at),
        model_ref=c.model_ref,
        preset_id=c.preset_id,
        comparison_id=c.comparison_id,
        sampling=json.loads(c.sampling_json or "{}"),
        pinned=bool(c.pinned),
        archived=bool(c.archived),
        active_message_id=c.active_message_id,
        deleted=c.deleted_at is not None,
        title_provisional=bool(c.title_provisional),
        origin=c.origin,
    )


def message_record(m: Message) -> MessageRecord:
    tool_calls, tool_result = tool_from_json(m.tool_json)
    return MessageRecord(
        id=m.id,
        conversation_id=m.conversation_id,
        parent_id=m.parent_id,
        role=m.role,
        content=m.content,
        status=_STATUS[m.status],
        error_text=m.error_text,
        prompt_tokens=m.prompt_tokens,
        completion_tokens=m.completion_tokens,
        ttft_s=m.ttft_s,
        tokens_per_s=m.tokens_per_s,
        model=m.model,
        created_at=_aware(m.created_at),
        updated_at=_aware(m.updated_at),
        sources=attachments.sources_from_json(m.sources_json),
        tool_calls=tool_calls,
        tool_result=tool_result,
    )


_STATUS = {s.value: s for s in MessageStatus}


def _aware(value: datetime) -> datetime:
    # SQLite stores no zone; every timestamp written here is UTC.
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ChatRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    # ----- conversations -----------------------------------------------------------

    def create_conversation(
        self,
        title: str = "",
        model_ref: str | None = None,
        preset_id: int | None = None,
        sampling: dict | None = None,
        comparison_id: int | None = None,
    ) -> ConversationRecord:
        with self.db.begin() as s:
            conv = self._new_conversation(s, title=title, model_ref=model_ref, preset_id=preset_id,
                                          comparison_id=comparison_id, sampling_json=json.dumps(sampling or {}))
            return conversation_record(conv)

    @staticmethod
    def _new_conversation(s: Session, **fields) -> Conversation:
        now = utcnow()
        conv = Conversation(pinned=False, archived=False, created_at=now, updated_at=now, **fields)
        s.add(conv)
        s.flush()
        return conv

    def start_conversation(
        self,
        opening: Sequence[tuple[str, str]],
        documents: Sequence[NewDocument] = (),
        title: str = "",
        title_provisional: bool = False,
        model_ref: str | None = None,
    ) -> tuple[ConversationRecord, MessageRecord]:
        """A new conversation with its first messages ((role, content): a system prompt, the
        user's message), the last one attaching documents: all in one transaction, so a
        command killed while it stores a large file leaves no empty chat behind. Returns the
        conversation and its last message."""
        if not opening or any(role not in ROLES for role, _ in opening):
            raise StorageError(f"a conversation opens with messages whose roles are in {ROLES}")
        attachments.check_documents(documents)
        with self.db.begin() as s:
            conv = self._new_conversation(s, title=title, title_provisional=title_provisional, model_ref=model_ref,
                                          sampling_json="{}")
            for role, content in opening:
                msg = self._insert_message(s, conv.id, role, content, ACTIVE, MessageStatus.COMPLETE, None, {})
            attachments.insert_documents(s, documents)
            attachments.attach(s, msg.id, [(doc.sha256, doc.name) for doc in documents])
            return conversation_record(conv), message_record(msg)

    def get_conversation(self, conversation_id: int) -> ConversationRecord:
        with self.db.begin() as s:
            return conversation_record(self._conversation(s, conversation_id))

    def list_conversations(
        self, include_archived: bool = False, include_deleted: bool = False, standalone_only: bool = False,
        include_unused: bool = True, origin: str | None = CHAT_ORIGIN, limit: int | None = None,
    ) -> list[ConversationRecord]:
        """standalone_only leaves out the panes of comparisons (listed as comparisons);
        include_unused=False the chats nothing was sent in (storage/unused_chats.py). origin:
        the chats (default), the server's stored Responses (API_ORIGIN, storage/responses.py:
        a batch stores thousands, hence limit) or None for both. Pinned first, newest first."""
        query = select(Conversation)
        if origin is not None:
            query = query.where(Conversation.origin == origin)
        if not include_unused:
            query = query.where(~unused_chats.unused())
        if standalone_only:
            query = query.where(Conversation.comparison_id.is_(None))
        if not include_archived:
            query = query.where(Conversation.archived.is_(False))
        if not include_deleted:
            query = query.where(Conversation.deleted_at.is_(None))
        query = query.order_by(Conversation.pinned.desc(), Conversation.updated_at.desc()).limit(limit)
        with self.db.begin() as s:
            return [conversation_record(c) for c in s.scalars(query)]

    def count_conversations(self, origin: str = CHAT_ORIGIN) -> int:
        """Those of an origin not deleted: how many a limited list leaves out."""
        query = select(func.count()).select_from(Conversation).where(Conversation.origin == origin,
                                                                      Conversation.deleted_at.is_(None))
        with self.db.begin() as s:
            return int(s.scalar(query) or 0)

    def update_conversation(self, conversation_id: int, **fields) -> ConversationRecord:
        """Change title, model_ref, preset_id, sampling (dict), pinned or archived."""
        allowed = {"title", "model_ref", "preset_id", "sampling", "pinned", "archived", "comparison_id"}
        unknown = set(fields) - allowed
        if unknown:
            raise StorageError(f"cannot update conversation field(s): {', '.join(sorted(unknown))}")
        with self.db.begin() as s:
            conv = self._conversation(s, conversation_id)
            for name, value in fields.items():
                if name == "sampling":
                    conv.sampling_json = json.dumps(value or {})
                else:
                    setattr(conv, name, value)
                if name == "title":  # a title set on purpose is never replaced by a generated one
                    conv.title_provisional = False
            conv.updated_at = utcnow()
            return conversation_record(conv)

    def copy_active_path(self, conversation_id: int, title: str | None = None,
                         up_to: int | None = None) -> ConversationRecord:
        """A new standalone conversation holding the branch on screen of another one, with
        its settings: how one pane of a comparison goes on as a normal chat. up_to: the
        branch from the root down to that message instead (Branch into a new chat)."""
        with self.db.begin() as s:
            source = self._conversation(s, conversation_id)
            if up_to is not None:
                self._check_parent(s, conversation_id, up_to)
            now = utcnow()
            copy = Conversation(
                title=source.title if title is None else title,
                model_ref=source.model_ref,
                preset_id=source.preset_id,
                sampling_json=source.sampling_json,
                pinned=False,
                archived=False,
                created_at=now,
                updated_at=now,
            )
            s.add(copy)
            s.flush()
            parent = None
            leaf = source.active_message_id if up_to is None else up_to
            rows = s.execute(_path_query(leaf)) if leaf is not None else ()
            copied: dict[int, int] = {}  # message id in the source -> in the copy
            for m in map(_row_record, rows):
                status = MessageStatus.INTERRUPTED if m.status is MessageStatus.STREAMING else m.status
                msg = Message(
                    conversation_id=copy.id, parent_id=parent, role=m.role, content=m.content,
                    status=status.value, error_text=m.error_text, prompt_tokens=m.prompt_tokens,
                    completion_tokens=m.completion_tokens, ttft_s=m.ttft_s, tokens_per_s=m.tokens_per_s,
                    model=m.model, created_at=m.created_at, updated_at=m.updated_at,
                    sources_json=attachments.sources_to_json(m.sources),
                    tool_json=tool_to_json(m.tool_calls, m.tool_result),
                )
                s.add(msg)
                s.flush()
                parent = copied[m.id] = msg.id
            attachments.copy_attachments(s, copied)  # the same documents, not copies of them
            copy.active_message_id = parent
            return conversation_record(copy)

    def rename(self, conversation_id: int, title: str, provisional: bool = False) -> ConversationRecord:
        """provisional: a stand-in the generated title may replace; any other title is kept."""
        with self.db.begin() as s:
            conv = self._conversation(s, conversation_id)
            conv.title = title
            conv.title_provisional = provisional
            # updated_at stays: a title is not activity, and the sidebar is ordered by activity
            # (a rename moved the chat from under the cursor to the top).
            return conversation_record(conv)

    def set_generated_title(self, conversation_id: int, title: str) -> ConversationRecord | None:
        """The model's title, only over a provisional one (in one transaction, so a rename
        by the user meanwhile wins). None when the title was not provisional any more."""
        with self.db.begin() as s:
            conv = self._conversation(s, conversation_id)
            if not conv.title_provisional:
                return None
            conv.title = title
            conv.title_provisional = False  # updated_at stays: a title is not activity (sidebar order)
            return conversation_record(conv)

    def delete(self, conversation_id: int) -> None:
        """Soft delete: hidden from lists and search until restored or purged."""
        with self.db.begin() as s:
            self._conversation(s, conversation_id).deleted_at = utcnow()

    def restore(self, conversation_id: int) -> None:
        with self.db.begin() as s:
            self._conversation(s, conversation_id).deleted_at = None

    def purge_deleted(self, deleted_before: datetime | None = None) -> int:
        """Really delete soft-deleted conversations (all, or those deleted before a time)."""
        cond: ColumnElement[bool] = Conversation.deleted_at.is_not(None)
        if deleted_before is not None:
            cond = and_(cond, Conversation.deleted_at < deleted_before)
        with self.db.begin() as s:
            ids = list(s.scalars(select(Conversation.id).where(cond)))
            named: set[str] = set()
            for conv_id in ids:
                named |= attachments.detach(s, select(Message.id).where(Message.conversation_id == conv_id))
                # Plain DELETE statements: the session holds none of these rows to update.
                s.execute(delete(Message).where(Message.conversation_id == conv_id),
                          execution_options={"synchronize_session": False})
                s.execute(delete(Conversation).where(Conversation.id == conv_id),
                          execution_options={"synchronize_session": False})
            attachments.drop_unreferenced(s, named)  # another chat's documents stay
            return len(ids)

    # ----- messages ----------------------------------------------------------------

    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        parent_id: int | None | _Active = ACTIVE,
        status: MessageStatus = MessageStatus.COMPLETE,
        model: str | None = None,
        documents: Sequence[NewDocument] = (),
        tool_calls: Sequence[ToolCallRecord] = (),
        tool_result: ToolResultRecord | None = None,
        **stats,
    ) -> MessageRecord:
        """Append a message under parent_id (default: the active leaf) and make it active.
        documents: attached to it in order, each stored once by sha256 (an existing one is
        reused as it is); the message, the documents and the attachments in one transaction.
        tool_calls: an assistant turn's calls; tool_result: what a "tool" message answers."""
        if role not in ROLES:
            raise StorageError(f"role must be one of {ROLES}, got {role!r}")
        attachments.check_documents(documents)
        with self.db.begin() as s:
            msg = self._insert_message(s, conversation_id, role, content, parent_id, status, model, stats)
            msg.tool_json = tool_to_json(tool_calls, tool_result)
            attachments.insert_documents(s, documents)
            attachments.attach(s, msg.id, [(doc.sha256, doc.name) for doc in documents])
            return message_record(msg)

    def _insert_message(self, s: Session, conversation_id: int, role: str, content: str,
                        parent_id: int | None | _Active, status: MessageStatus, model: str | None,
                        stats: dict) -> Message:
        conv = self._conversation(s, conversation_id)
        parent = conv.active_message_id if parent_id is ACTIVE else parent_id
        if parent is not None:
            self._check_parent(s, conversation_id, parent)
        now = utcnow()
        msg = Message(
            conversation_id=conversation_id,
            parent_id=parent,
            role=role,
            content=content,
            status=MessageStatus(status).value,
            model=model,
            owner_pid=os.getpid() if status == MessageStatus.STREAMING else None,
            created_at=now,
            updated_at=now,
            **stats,
        )
        s.add(msg)
        s.flush()
        conv.active_message_id = msg.id
        conv.updated_at = now
        return msg

    def start_reply(
        self, conversation_id: int, parent_id: int | None | _Active = ACTIVE, model: str | None = None
    ) -> MessageRecord:
        """An empty assistant message in `streaming` state: checkpoint it, then finish it."""
        return self.add_message(
            conversation_id, "assistant", "", parent_id, MessageStatus.STREAMING, model
        )

    def checkpoint(self, message_id: int, content: str, completion_tokens: int | None = None) -> None:
        """Save the text generated so far. One small UPDATE; cheap enough for every second."""
        values = {"content": content, "updated_at": utcnow()}
        if completion_tokens is not None:
            values["completion_tokens"] = completion_tokens
        with self.db.begin() as s:
            done = s.execute(
                update(Message)
                .where(Message.id == message_id, Message.status == MessageStatus.STREAMING.value)
                .values(**values)
            )
            if done.rowcount != 1:
                raise StorageError(f"message {message_id} is not streaming")

    def finish_reply(
        self,
        message_id: int,
        content: str,
        status: MessageStatus = MessageStatus.COMPLETE,
        error_text: str | None = None,
        sources: Sequence[SourceRecord] | None = None,
        **stats,
    ) -> MessageRecord:
        """Final text, status and stats (prompt_tokens, completion_tokens, ttft_s, tokens_per_s);
        sources: the excerpts it was shown as the text left them (which it cites), replacing
        those stored with its prompt (None: those stay)."""
        with self.db.begin() as s:
            msg = s.get(Message, message_id)
            if msg is None:
                raise NotFoundError(f"message {message_id} does not exist")
            if sources is not None:
                msg.sources_json = attachments.sources_to_json(sources)
            msg.content = content
            msg.status = MessageStatus(status).value
            msg.error_text = error_text
            msg.owner_pid = None
            msg.updated_at = utcnow()
            for name, value in stats.items():
                setattr(msg, name, value)
            return message_record(msg)

    def set_tool_calls(self, message_id: int, calls: Sequence[ToolCallRecord], content: str = "") -> MessageRecord:
        """A finished reply that turned out to be tool calls (the desktop reads them after the
        reply ended): its calls kept, its text (the calls as the model wrote them) replaced by
        content, the prose it wrote before them (empty when it only called), as
        add_message(tool_calls=) stores such a turn."""
        if not calls:
            raise StorageError("set_tool_calls needs at least one call")
        with self.db.begin() as s:
            msg = s.get(Message, message_id)
            if msg is None:
                raise NotFoundError(f"message {message_id} does not exist")
            if msg.role != "assistant" or msg.status == MessageStatus.STREAMING.value:
                raise StorageError(f"message {message_id} is not a finished reply")
            msg.content = content
            msg.tool_json = tool_to_json(calls, None)
            msg.updated_at = utcnow()
            return message_record(msg)

    def resume_reply(self, message_id: int) -> MessageRecord:
        """A finished assistant reply back in `streaming` state, to be continued (Continue
        after the token limit): the same message grows; checkpoint and finish it as usual."""
        with self.db.begin() as s:
            msg = s.get(Message, message_id)
            if msg is None:
                raise NotFoundError(f"message {message_id} does not exist")
            if msg.role != "assistant" or msg.status == MessageStatus.STREAMING.value:
                raise StorageError(f"message {message_id} is not a finished reply")
            msg.status = MessageStatus.STREAMING.value
            msg.owner_pid = os.getpid()
            msg.updated_at = utcnow()
            return message_record(msg)

    # ----- the system prompt -------------------------------------------------------

    def set_system_prompt(self, conversation_id: int, text: str) -> None:
        """The chat's system prompt, at the root of every branch: changed in place, added
        above the existing roots, or removed (empty text). The next request uses it."""
        with self.db.begin() as s:
            conv = self._conversation(s, conversation_id)
            roots = list(s.scalars(select(Message).where(Message.conversation_id == conversation_id,
                                                         Message.parent_id.is_(None)).order_by(Message.id)))
            system = next((m for m in roots if m.role == "system"), None)
            now = utcnow()
            if system is not None and text:
                system.content, system.updated_at = text, now
            elif system is not None:  # removed: its children become the roots
                s.execute(update(Message).where(Message.parent_id == system.id).values(parent_id=None))
                if conv.active_message_id == system.id:
                    conv.active_message_id = None
                s.delete(system)
            elif text:
                system = Message(conversation_id=conversation_id, parent_id=None, role="system", content=text,
                                 status=MessageStatus.COMPLETE.value, created_at=now, updated_at=now)
                s.add(system)
                s.flush()
                for root in roots:
                    root.parent_id = system.id
                if conv.active_message_id is None:
                    conv.active_message_id = system.id
            conv.updated_at = now

    def system_prompt_sharers(self, conversation_id: int, text: str) -> int:
        """How many other chats (not deleted) start with this same system prompt: their
        requests share its KV cells through the prefix cache."""
        if not text:
            return 0
        query = (
            select(func.count(func.distinct(Message.conversation_id)))
            .join(Conversation, Conversation.id == Message.conversation_id)
            .where(Message.role == "system", Message.parent_id.is_(None), Message.content == text,
                   Message.conversation_id != conversation_id, Conversation.deleted_at.is_(None))
        )
        with self.db.begin() as s:
            return int(s.scalar(query) or 0)

    def edit_message(self, message_id: int, content: str) -> MessageRecord:
        """Edit-and-resend: a new sibling with the new text and the original's attachments;
        the old branch stays."""
        with self.db.begin() as s:
            original = s.get(Message, message_id)
            if original is None:
                raise NotFoundError(f"message {message_id} does not exist")
            # An edited reply answers the very prompt the original did: its count stays (the
            # context meter measures the chat by it); the reply's own numbers were the original's.
            stats = {"prompt_tokens": original.prompt_tokens} if original.role == "assistant" else {}
            msg = self._insert_message(s, original.conversation_id, original.role, content, original.parent_id,
                                       MessageStatus.COMPLETE, None, stats)
            attachments.copy_attachments(s, {original.id: msg.id})
            return message_record(msg)

    def replies_under(self, message_id: int) -> int:
        """How many messages follow message_id in every branch (what delete_message takes with it)."""
        with self.db.begin() as s:
            return int(s.scalar(select(func.count()).select_from(_subtree(message_id))) or 1) - 1

    def delete_message(self, message_id: int) -> int:
        """Delete a message with every message after it, in all branches: a reply left
        without its question (or a question without what came before) is not a chat the
        model saw. The branch on screen, if it went, falls back to the newest leaf under the
        parent (or of the chat). Returns how many messages were deleted."""
        with self.db.begin() as s:
            msg = s.get(Message, message_id)
            if msg is None:
                raise NotFoundError(f"message {message_id} does not exist")
            conv = self._conversation(s, msg.conversation_id)
            gone = set(s.scalars(select(_subtree(message_id).c.id)))
            named = attachments.detach(s, gone)
            # Row by row (not the foreign key's cascade), so the search index's triggers see each.
            s.execute(delete(Message).where(Message.id.in_(gone)), execution_options={"synchronize_session": False})
            attachments.drop_unreferenced(s, named)  # those another message attaches stay
            if conv.active_message_id in gone:
                conv.active_message_id = self._newest_leaf(s, conv.id, msg.parent_id)
            conv.updated_at = utcnow()
            return len(gone)

    def get_message(self, message_id: int) -> MessageRecord:
        with self.db.begin() as s:
            msg = s.get(Message, message_id)
            if msg is None:
                raise NotFoundError(f"message {message_id} does not exist")
            return message_record(msg)

    def siblings(self, message_id: int) -> list[int]:
        """Ids of the message and its siblings (same parent), oldest first."""
        with self.db.begin() as s:
            msg = s.get(Message, message_id)
            if msg is None:
                raise NotFoundError(f"message {message_id} does not exist")
            return self._sibling_ids(s, msg.conversation_id, msg.parent_id)

    def switch_to(self, message_id: int) -> int:
        """Show the branch through message_id, down to its most recent leaf. Returns the leaf."""
        with self.db.begin() as s:
            msg = s.get(Message, message_id)
            if msg is None:
                raise NotFoundError(f"message {message_id} does not exist")
            # The newest message of the subtree: a child is always newer than its
            # parent, so it is a leaf (the newest child at each level may not lead there).
            leaf = s.scalar(select(func.max(_subtree(msg.id).c.id)))
            conv = self._conversation(s, msg.conversation_id)
            conv.active_message_id = leaf
            return leaf

    def active_path(self, conversation_id: int) -> ActivePath:
        """The branch on screen, root first, with each message's position among siblings."""
        with self.db.begin() as s:
            conv = self._conversation(s, conversation_id)
            record = conversation_record(conv)
            if conv.active_message_id is None:
                return ActivePath(record, [])
            messages = [_row_record(row) for row in s.execute(_path_query(conv.active_message_id))]
            return ActivePath(record, messages, self._branches(s, conversation_id, messages),
                              attachments.attachments_of(s, [m.id for m in messages]))

    def recover_interrupted(self) -> int:
        """Mark messages left `streaming` by a process that is gone as `interrupted`.

        Their text up to the last checkpoint is kept. Returns how many were marked.
        """
        me = os.getpid()
        with self.db.begin() as s:
            streaming = s.execute(
                select(Message.id, Message.owner_pid).where(
                    Message.status == MessageStatus.STREAMING.value
                )
            )
            # At start-up nothing of ours streams yet, so our own pid is stale too
            # (a pid reused after a reboot).
            stale = [m.id for m in streaming if m.owner_pid == me or not pid_alive(m.owner_pid)]
            if stale:
                s.execute(
                    update(Message)
                    .where(Message.id.in_(stale))
                    .values(status=MessageStatus.INTERRUPTED.value, owner_pid=None)
                )
            return len(stale)

    # ----- internals ---------------------------------------------------------------

    def _conversation(self, s: Session, conversation_id: int) -> Conversation:
        conv = s.get(Conversation, conversation_id)
        if conv is None:
            raise NotFoundError(f"conversation {conversation_id} does not exist")
        return conv

    def _check_parent(self, s: Session, conversation_id: int, parent_id: int) -> None:
        owner = s.scalar(select(Message.conversation_id).where(Message.id == parent_id))
        if owner != conversation_id:
            raise StorageError(f"message {parent_id} is not in conversation {conversation_id}")

    def _newest_leaf(self, s: Session, conversation_id: int, under: int | None) -> int | None:
        """The newest message without replies under `under` (itself if it has none left),
        or of the whole chat when under is None (a root was deleted)."""
        replies = select(Message.id).where(Message.parent_id == _Leaf.id).exists()
        scope = select(_Leaf.id).where(_Leaf.conversation_id == conversation_id, ~replies)
        if under is not None:
            scope = scope.where(_Leaf.id.in_(select(_subtree(under).c.id)))
        return s.scalar(select(func.max(scope.subquery().c.id)))

    def _sibling_ids(self, s: Session, conversation_id: int, parent_id: int | None) -> list[int]:
        parent_cond = Message.parent_id.is_(None) if parent_id is None else Message.parent_id == parent_id
        return list(
            s.scalars(
                select(Message.id)
                .where(Message.conversation_id == conversation_id, parent_cond)
                .order_by(Message.id)
            )
        )

    def _branches(
        self, s: Session, conversation_id: int, path: list[MessageRecord]
    ) -> dict[int, BranchPosition]:
        """Positions of the path's messages that have siblings (most have none)."""
        in_conv = Message.conversation_id == conversation_id
        forks = (
            select(Message.parent_id)
            .where(in_conv)
            .group_by(Message.parent_id)
            .having(func.count() > 1)
        )
        fork_parents = set(s.scalars(forks))
        if not fork_parents:
            return {}
        cond: ColumnElement[bool] = Message.parent_id.in_([p for p in fork_parents if p is not None])
        if None in fork_parents:
            cond = cond | Message.parent_id.is_(None)
        children: dict[int | None, list[int]] = {}
        for parent, msg_id in s.execute(
            select(Message.parent_id, Message.id).where(in_conv, cond).order_by(Message.id)
        ):
            children.setdefault(parent, []).append(msg_id)
        out = {}
        for m in path:
            sibs = children.get(m.parent_id)
            if sibs:
                out[m.id] = BranchPosition(sibs.index(m.id) + 1, len(sibs), tuple(sibs))
        return out
