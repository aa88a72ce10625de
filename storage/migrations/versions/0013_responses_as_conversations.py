"""The server's stored Responses become conversations (issue 35): a response is a branch of a
conversation of origin "api", its input turns messages and its reply a message marked with
the response's id, instead of a row of the `responses` table holding its whole input as JSON.

New columns: conversations.origin ("chat" for every existing one), messages.response_id
(unique), messages.api_json (a turn's parts beyond text; a reply's status, usage, previous
response and count of own turns). Each row of `responses` is moved, oldest first: one that
continued a response already moved (its input beginning with that one's conversation) goes
under that reply; any other opens a conversation of its own. The table is then dropped.

Downgrade rebuilds the table from the marked replies (each with its branch's turns as input)
and removes the "api" conversations and the columns.

Revision ID: 0013
Revises: 0012
"""

import json
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TITLE_CHARS = 60


def upgrade() -> None:
    op.add_column("conversations", sa.Column("origin", sa.String(16), nullable=False, server_default="chat"))
    op.add_column("messages", sa.Column("response_id", sa.String(64), nullable=True))
    op.add_column("messages", sa.Column("api_json", sa.Text, nullable=True))
    op.create_index("ix_messages_response_id", "messages", ["response_id"], unique=True)
    _move_responses(op.get_bind())
    op.drop_table("responses")


def downgrade() -> None:
    op.create_table(
        "responses",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("input_json", sa.Text, nullable=False),
        sa.Column("output_text", sa.Text, nullable=False),
        sa.Column("previous_response_id", sa.String(64)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("usage_json", sa.Text, nullable=False),
    )
    conn = op.get_bind()
    _rows_back(conn)
    api = "SELECT id FROM conversations WHERE origin = 'api'"
    conn.execute(sa.text(f"DELETE FROM messages WHERE conversation_id IN ({api})"))
    conn.execute(sa.text("DELETE FROM conversations WHERE origin = 'api'"))
    op.drop_index("ix_messages_response_id", "messages")
    for table, column in (("messages", "api_json"), ("messages", "response_id"), ("conversations", "origin")):
        op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")  # SQLite 3.35+, as 0011


def _move_responses(conn: sa.Connection) -> None:
    rows = conn.execute(sa.text("SELECT id, created_at, model, input_json, output_text, previous_response_id, "
                                "status, usage_json FROM responses ORDER BY created_at, id")).mappings().all()
    placed: dict[str, tuple[int, int, list]] = {}  # id -> its reply row, conversation, whole branch
    for row in rows:
        turns = json.loads(row["input_json"])
        before = placed.get(row["previous_response_id"] or "")
        if before is not None and turns[:len(before[2])] == before[2]:
            parent, conv, own = before[0], before[1], turns[len(before[2]):]
        else:
            parent, conv, own = None, _new_conversation(conn, row, turns), turns
        for turn in own:
            parent = _insert(conn, conv, parent, turn["role"], turn["content"], row["created_at"], None)
        usage = json.loads(row["usage_json"])
        api = {"status": row["status"], "usage": usage, "previous_response_id": row["previous_response_id"],
               "turns": len(own)}
        reply = _insert(conn, conv, parent, "assistant", row["output_text"], row["created_at"], api,
                        row["id"], row["model"], usage)
        conn.execute(sa.text("UPDATE conversations SET active_message_id = :m, updated_at = :t WHERE id = :c"),
                     {"m": reply, "t": row["created_at"], "c": conv})
        placed[row["id"]] = (reply, conv, [*turns, {"role": "assistant", "content": row["output_text"]}])


def _new_conversation(conn: sa.Connection, row: sa.RowMapping, turns: list) -> int:
    first = next((_text(t["content"]) for t in turns if t.get("role") == "user"), "") or "API response"
    title = " ".join(first.split())[:TITLE_CHARS]
    return int(conn.execute(sa.text(
        "INSERT INTO conversations (title, title_provisional, created_at, updated_at, model_ref, sampling_json, "
        "pinned, archived, origin) VALUES (:title, 0, :t, :t, :model, '{}', 0, 0, 'api') RETURNING id"),
        {"title": title, "t": row["created_at"], "model": row["model"]}).scalar_one())


def _insert(conn: sa.Connection, conv: int, parent: int | None, role: str, content: object, moment: datetime,
            api: dict | None, response_id: str | None = None, model: str | None = None,
            usage: dict | None = None) -> int:
    if not isinstance(content, str):
        api = {**(api or {}), "content": content}
    usage = usage or {}
    return int(conn.execute(sa.text(
        "INSERT INTO messages (conversation_id, parent_id, role, content, status, model, prompt_tokens, "
        "completion_tokens, created_at, updated_at, response_id, api_json) VALUES (:c, :p, :role, :content, "
        "'complete', :model, :pt, :ct, :t, :t, :rid, :api) RETURNING id"),
        {"c": conv, "p": parent, "role": role, "content": _text(content), "model": model,
         "pt": usage.get("input_tokens"), "ct": usage.get("output_tokens"), "t": moment, "rid": response_id,
         "api": json.dumps(api) if api is not None else None}).scalar_one())


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text") \
        if isinstance(content, list) else ""


def _rows_back(conn: sa.Connection) -> None:
    replies = conn.execute(sa.text("SELECT id, parent_id, content, model, created_at, response_id, api_json "
                                   "FROM messages WHERE response_id IS NOT NULL")).mappings().all()
    for reply in replies:
        api = json.loads(reply["api_json"] or "{}")
        turns = []
        parent = reply["parent_id"]
        while parent is not None:
            row = conn.execute(sa.text("SELECT parent_id, role, content, api_json FROM messages WHERE id = :i"),
                               {"i": parent}).mappings().one()
            content = json.loads(row["api_json"]).get("content", row["content"]) if row["api_json"] else row["content"]
            turns.append({"role": row["role"], "content": content})
            parent = row["parent_id"]
        conn.execute(sa.text(
            "INSERT INTO responses (id, created_at, model, input_json, output_text, previous_response_id, status, "
            "usage_json) VALUES (:id, :t, :model, :input, :output, :prev, :status, :usage)"),
            {"id": reply["response_id"], "t": reply["created_at"], "model": reply["model"] or "",
             "input": json.dumps(turns[::-1]), "output": reply["content"], "prev": api.get("previous_response_id"),
             "status": api.get("status", "completed"), "usage": json.dumps(api.get("usage", {}))})
