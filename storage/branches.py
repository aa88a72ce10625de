"""A message's branch: the messages from its conversation's first one down to it, read in
one recursive query (walking up one parent a query took 0.2 s for a 600-message branch: a
Responses client 300 turns into a conversation waited that long on every request)."""

from __future__ import annotations

from sqlalchemy import CTE, Select, literal, select

from storage.schema import Message


def branch_cte(leaf: int) -> CTE:
    """The branch's message ids with their distance from leaf (depth 0: leaf itself)."""
    path = (
        select(Message.id, Message.parent_id, literal(0).label("depth"))
        .where(Message.id == leaf)
        .cte("path", recursive=True)
    )
    return path.union_all(
        select(Message.id, Message.parent_id, path.c.depth + 1).join(path, Message.id == path.c.parent_id)
    )


def branch_messages(leaf: int) -> Select[Message]:
    """The branch's messages as rows of the ORM, root first."""
    path = branch_cte(leaf)
    return select(Message).join(path, Message.id == path.c.id).order_by(path.c.depth.desc())
