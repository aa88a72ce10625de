"""Writing a validated import in short transactions, still all or nothing.

SQLite has one write lock per file. An import written in one transaction, one flush per
message, held it for ~15 s for 10,000 conversations, and a chat saving its reply meanwhile
failed with "database is locked". Here:

* Batches: at most BATCH_ROWS rows (conversations and messages) per transaction, written
  with executemany; ids are assigned here, the next free ones read under the write lock
  (BEGIN IMMEDIATE), so no flush per row. A chat's write waits one batch, not the import.
* Hidden until done: every conversation is written as if deleted at the import's start
  (`deleted_at`, which every list, search, comparison and export already leaves out). One
  short last transaction links presets and active messages, settles the comparisons'
  settings and makes the conversations visible.
* All or nothing: if a batch or the last step fails, what was written is deleted again. If
  the process dies midway, the hidden conversations are purged with the deleted ones a day
  later (ChatRepository.purge_deleted at start-up); they are never shown.
* Documents first, in their own transaction: those already stored are reused, the new ones
  are deleted again by an undo (and, after a crash, by DocumentRepository.purge_unused).
  Attachment rows go with their messages' batch.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from storage.attachments import detach, drop_unreferenced, insert_documents, sources_to_json
from storage.busy import retry_locked
from storage.chat_file_documents import source_records
from storage.database import Database
from storage.errors import ImportRejected
from storage.records import MessageStatus, NewDocument
from storage.schema import Comparison, Conversation, Message, MessageAttachment, Preset, utcnow
from storage.tool_use import tool_json_of_file

log = logging.getLogger(__name__)

BATCH_ROWS = 1000  # ~20 ms of writing: a concurrent writer waits about that long
MAX_PAUSE_S = 0.1
DELETE_CHUNK = 500  # conversations removed per transaction when an import is undone
STATS = ("prompt_tokens", "completion_tokens", "ttft_s", "tokens_per_s")

# (a comparison's settings, {conversation id in the file: id given on import}) -> settings
SettingsRemap = Callable[[dict, dict], dict]


@dataclass(slots=True)
class _Staged:
    """One conversation of the file while it is written."""

    data: dict
    comparison_id: int | None
    id: int | None = None
    ids: dict = field(default_factory=dict)  # message id in the file -> id given here


@dataclass(slots=True)
class _Import:
    hidden_at: datetime
    comparisons: dict = field(default_factory=dict)  # comparison id in the file -> id given here
    written: list[int] = field(default_factory=list)  # conversation ids committed so far
    documents: set[str] = field(default_factory=set)  # sha256s this import stored (not reused)


def write_import(db: Database, conversations: list[dict], comparisons: list[dict],
                 remap: SettingsRemap | None, documents: Sequence[NewDocument] = ()) -> list[int]:
    """Write a validated import; its new conversation ids, in the file's order."""
    job = _Import(hidden_at=utcnow())
    try:
        if documents:
            _locked(db, lambda conn: _write_documents(conn, job, documents), "import documents")
        if comparisons:
            _locked(db, lambda conn: _write_comparisons(conn, job, comparisons), "import comparisons")
        staged = [_Staged(c, job.comparisons.get(c.get("comparison"))) for c in conversations]
        for batch in _batches(staged):
            held = _locked(db, partial(_write_batch, job=job, rows=_prepare(job, batch)), "import a batch")
            # As long a pause as the lock was held: SQLite's busy handler polls (every 100 ms
            # at last) instead of queueing, so a writer waiting meanwhile needs the lock free
            # often and long enough to find it so, or it may miss many batches in a row.
            time.sleep(min(held, MAX_PAUSE_S))
        _locked(db, lambda conn: _publish(conn, staged, comparisons, job, remap), "finish the import")
    except BaseException:
        _undo(db, job)
        raise
    return [s.id for s in staged if s.id is not None]


def _locked(db: Database, work: Callable[[Connection], None], what: str) -> float:
    """work in one write transaction, tried again while another writer holds the lock;
    the seconds it took."""
    def attempt() -> None:
        with db.immediate() as conn:
            work(conn)

    started = time.monotonic()
    retry_locked(attempt, what)
    return time.monotonic() - started


# ----- batches -----------------------------------------------------------------------------


def _batches(staged: list[_Staged]) -> Iterator[list[tuple[_Staged, int, int]]]:
    """Pieces (conversation, first message, end) of at most BATCH_ROWS rows each; a long
    conversation is split across batches (validation put each parent before its children,
    so a parent is always written in the same batch or an earlier one)."""
    batch: list[tuple[_Staged, int, int]] = []
    room = BATCH_ROWS
    for conv in staged:
        messages = len(conv.data["messages"])
        start = 0
        room -= 1  # the conversation's own row
        while True:
            end = min(messages, start + max(room, 0))
            batch.append((conv, start, end))
            room -= end - start
            if room <= 0:
                yield batch
                batch, room = [], BATCH_ROWS
            if end >= messages:
                break
            start = end
    if batch:
        yield batch


@dataclass(slots=True)
class _Rows:
    """One batch's rows, built before the write lock is taken (the pause between batches
    is when a chat's write gets in). Ids are local (0, 1, ...) until _write_batch adds the
    next free ids; -1: the row already holds its final id (an earlier batch's)."""

    conversations: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    conversation_of: list[int] = field(default_factory=list)  # per message: local conversation
    parent_of: list[int] = field(default_factory=list)  # per message: local parent
    attachments: list[dict] = field(default_factory=list)
    attachment_of: list[int] = field(default_factory=list)  # per attachment: local message
    # per piece: (conversation, its local index or -1, {message id in the file: local index})
    pieces: list[tuple[_Staged, int, dict]] = field(default_factory=list)


def _prepare(job: _Import, batch: list[tuple[_Staged, int, int]]) -> _Rows:
    rows = _Rows()
    now = utcnow()
    for conv, start, end in batch:
        local_conv = -1
        if conv.id is None:
            local_conv = len(rows.conversations)
            rows.conversations.append(_conversation_row(conv, job.hidden_at, now))
        local: dict = {}  # this piece's messages; conv.ids holds the earlier batches'
        for m in conv.data["messages"][start:end]:
            parent = m.get("parent")
            local[m["id"]] = len(rows.messages)
            rows.conversation_of.append(local_conv)
            rows.parent_of.append(local[parent] if parent in local else -1)
            rows.messages.append(_message_row(m, conv.id, None if parent in local else conv.ids.get(parent), now))
            for position, attachment in enumerate(m.get("attachments", ())):
                rows.attachment_of.append(local[m["id"]])
                rows.attachments.append({"message_id": None, "sha256": attachment["sha256"], "position": position,
                                         "name": attachment["name"]})
        rows.pieces.append((conv, local_conv, local))
    return rows


def _write_batch(conn: Connection, job: _Import, rows: _Rows) -> None:
    first_conv = _next_id(conn, Conversation)
    first_msg = _next_id(conn, Message)
    for i, row in enumerate(rows.conversations):
        row["id"] = first_conv + i
    for j, row in enumerate(rows.messages):
        row["id"] = first_msg + j
        if rows.conversation_of[j] >= 0:
            row["conversation_id"] = first_conv + rows.conversation_of[j]
        if rows.parent_of[j] >= 0:
            row["parent_id"] = first_msg + rows.parent_of[j]
    if rows.conversations:
        conn.execute(insert(Conversation), rows.conversations)
    if rows.messages:
        conn.execute(insert(Message), rows.messages)
    for k, row in enumerate(rows.attachments):
        row["message_id"] = first_msg + rows.attachment_of[k]
    if rows.attachments:
        conn.execute(insert(MessageAttachment), rows.attachments)
    conn.commit()
    # Only now: a batch rolled back (and tried again) must not leave ids behind.
    for conv, local_conv, local in rows.pieces:
        if local_conv >= 0:
            conv.id = first_conv + local_conv
            job.written.append(conv.id)
        conv.ids.update((file_id, first_msg + j) for file_id, j in local.items())


def _next_id(conn: Connection, table) -> int:
    return int(conn.scalar(select(func.coalesce(func.max(table.id), 0))) or 0) + 1


def _conversation_row(conv: _Staged, hidden_at: datetime, now: datetime) -> dict:
    data = conv.data
    return {
        "id": None,  # given under the write lock
        "title": data.get("title", ""),
        "title_provisional": False,
        "created_at": parse_time(data.get("created_at"), "") or now,
        "updated_at": parse_time(data.get("updated_at"), "") or now,
        "model_ref": data.get("model"),
        "preset_id": None,  # linked by _publish: presets are shared, so written last
        "comparison_id": conv.comparison_id,
        "sampling_json": json.dumps(data.get("sampling", {})),
        "pinned": bool(data.get("pinned", False)),
        "archived": bool(data.get("archived", False)),
        "active_message_id": None,  # set by _publish, once every message has its id
        "deleted_at": hidden_at,
    }


def _message_row(m: dict, conv_id: int | None, parent_id: int | None, now: datetime) -> dict:
    status = m.get("status", "complete")
    return {
        "id": None,  # given under the write lock
        "conversation_id": conv_id,
        "parent_id": parent_id,
        "role": m["role"],
        "content": m["content"],
        # A message that was streaming when exported is not streaming here.
        "status": MessageStatus.INTERRUPTED.value if status == MessageStatus.STREAMING.value else status,
        "error_text": m.get("error"),
        **{k: m.get(k) for k in STATS},
        "model": m.get("model"),
        "sources_json": sources_to_json(source_records(m)),
        "tool_json": tool_json_of_file(m.get("tool")),
        "owner_pid": None,
        "created_at": parse_time(m.get("created_at"), "") or now,
        "updated_at": now,
    }


def _write_documents(conn: Connection, job: _Import, documents: Sequence[NewDocument]) -> None:
    new = insert_documents(conn, documents)
    conn.commit()
    job.documents = new  # only now: a rolled-back try (and its retry) must not count


def _write_comparisons(conn: Connection, job: _Import, comparisons: list[dict]) -> None:
    next_id = _next_id(conn, Comparison)
    rows = []
    for i, comp in enumerate(comparisons):
        rows.append({"id": next_id + i, "title": comp.get("title", ""),
                     "settings_json": json.dumps(comp.get("settings", {})),
                     "created_at": parse_time(comp.get("created_at"), "") or datetime.now(timezone.utc)})
    conn.execute(insert(Comparison), rows)
    conn.commit()
    # Not listed until one of their conversations is visible (list_comparisons).
    job.comparisons = {comp["id"]: row["id"] for comp, row in zip(comparisons, rows)}


# ----- the last step ---------------------------------------------------------------------


def _publish(conn: Connection, staged: list[_Staged], comparisons: list[dict], job: _Import,
             remap: SettingsRemap | None) -> None:
    presets: dict[str, int] = {}
    rows = []
    for conv in staged:
        preset = conv.data.get("preset")
        if preset is not None and preset["name"] not in presets:
            presets[preset["name"]] = _preset_id(conn, preset)
        rows.append({
            "cid": conv.id,
            "pid": None if preset is None else presets[preset["name"]],
            "active": conv.ids.get(conv.data["active_message"]),  # named by validation when absent
        })
    if rows:
        conn.execute(
            update(Conversation).where(Conversation.id == bindparam("cid"))
            .values(deleted_at=None, preset_id=bindparam("pid"), active_message_id=bindparam("active")),
            rows,
        )
    members: dict[Any, dict] = {comp["id"]: {} for comp in comparisons}
    for conv in staged:
        if conv.data.get("comparison") is not None:
            members[conv.data["comparison"]][conv.data.get("id")] = conv.id
    for comp in comparisons:
        settings = comp.get("settings", {})
        if remap is not None:
            settings = remap(settings, members[comp["id"]])
        conn.execute(update(Comparison).where(Comparison.id == job.comparisons[comp["id"]])
                     .values(settings_json=json.dumps(settings)))
    conn.commit()


def _preset_id(conn: Connection, preset: dict) -> int:
    """Reuse a preset of the same name; create it otherwise."""
    existing = conn.scalar(select(Preset.id).where(Preset.name == preset["name"]))
    if existing is not None:
        return int(existing)
    return int(conn.execute(
        insert(Preset).values(name=preset["name"], system_prompt=preset.get("system_prompt", ""),
                              sampling_json=json.dumps(preset.get("sampling", {}))).returning(Preset.id)
    ).scalar_one())


# ----- undo --------------------------------------------------------------------------------


def _undo(db: Database, job: _Import) -> None:
    """Delete what a failed import wrote, in short transactions too. If even that fails, the
    rows stay hidden and are purged with the deleted conversations a day later."""
    try:
        for i in range(0, len(job.written), DELETE_CHUNK):
            chunk = job.written[i:i + DELETE_CHUNK]
            _locked(db, partial(_delete_conversations, ids=chunk), "undo the import")
        if job.comparisons:
            ids = list(job.comparisons.values())
            _locked(db, lambda conn: _delete_comparisons(conn, ids), "undo the import")
        if job.documents:
            _locked(db, lambda conn: _delete_documents(conn, job.documents), "undo the import")
    except Exception:
        log.warning("a failed import left %d hidden conversation(s); they are purged in a day",
                    len(job.written), exc_info=True)


def _delete_conversations(conn: Connection, ids: list[int]) -> None:
    detach(conn, select(Message.id).where(Message.conversation_id.in_(ids)))
    conn.execute(delete(Message).where(Message.conversation_id.in_(ids)))
    conn.execute(delete(Conversation).where(Conversation.id.in_(ids)))
    conn.commit()


def _delete_documents(conn: Connection, sha256s: set[str]) -> None:
    drop_unreferenced(conn, sha256s)  # unless a chat attached one meanwhile
    conn.commit()


def _delete_comparisons(conn: Connection, ids: list[int]) -> None:
    conn.execute(delete(Comparison).where(Comparison.id.in_(ids)))
    conn.commit()


# ----- dates -------------------------------------------------------------------------------


def parse_time(value: Any, where: str) -> datetime | None:
    """An ISO date-time as UTC (SQLite keeps no zone, so other offsets are converted); one
    that cannot be converted (year 1 at +01:00 is before year 1 in UTC) is refused."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        return parsed.astimezone(timezone.utc) if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    except (TypeError, ValueError):
        raise ImportRejected(f"import rejected, nothing was written: {where} is not an ISO date-time") from None
    except OverflowError:
        raise ImportRejected(
            f"import rejected, nothing was written: {where} {value!r} is out of range in UTC"
        ) from None
