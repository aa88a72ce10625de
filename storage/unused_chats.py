"""Chats in which nothing was sent (issue 39): a new chat has its row from the moment its
tab opens (the tab, its settings and its draft need an id), but until a message is sent it
is no chat to list, export or keep. Unused: no title (a title the user gave is a use), no
message but a system prompt, not a pane of a comparison, not deleted (Undo may bring it
back)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import ColumnElement, delete, select

from storage.database import Database
from storage.schema import Conversation, Message


def unused() -> ColumnElement[bool]:
    """The condition on Conversation that holds for an unused chat."""
    sent = select(Message.id).where(Message.conversation_id == Conversation.id, Message.role != "system").exists()
    return (Conversation.title == "") & Conversation.comparison_id.is_(None) & \
        Conversation.deleted_at.is_(None) & ~sent


def discard_unused(db: Database, only: Iterable[int] | None = None, keep: Iterable[int] = ()) -> list[int]:
    """Delete the unused chats (of `only`, when given; never those in `keep`) with their
    system prompts; returns their ids."""
    query = select(Conversation.id).where(unused())
    if only is not None:
        query = query.where(Conversation.id.in_(list(only)))
    kept = set(keep)
    with db.begin() as s:
        ids = [i for i in s.scalars(query) if i not in kept]
        if ids:
            # Row by row (not the foreign key's cascade), so the search index's triggers see each.
            s.execute(delete(Message).where(Message.conversation_id.in_(ids)),
                      execution_options={"synchronize_session": False})
            s.execute(delete(Conversation).where(Conversation.id.in_(ids)),
                      execution_options={"synchronize_session": False})
        return ids
