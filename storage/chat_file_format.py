"""The JSON chat file (format "chorus-chats", version 2; version 1 is read too): conversations
exported to it and imported back, with the documents their messages attach
(storage/chat_file_documents.py). Markdown, which is written only, is the app's (app/chats/markdown_export.py).

The format is documented in docs/chat-file-format.md. An import is validated completely
before anything is written, then written all or nothing in short transactions
(storage/import_writer.py): a malformed, truncated or oversized file changes nothing, and a
chat saving its reply meanwhile is not locked out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import select

from storage.chat_file_documents import (
    attachments_by_message,
    documents_json,
    validate_documents,
    validate_message_documents,
)
from storage.database import Database
from storage.errors import ImportRejected
from storage.errors import require_import as _require
from storage.import_writer import STATS, SettingsRemap, parse_time, write_import
from storage.records import ROLES, MessageStatus, NewDocument
from storage.schema import CHAT_ORIGIN, Comparison, Conversation, Message, Preset
from storage.tool_use import tool_json_of_file

FORMAT = "chorus-chats"
VERSION = 2  # 2: documents, attachments and sources (2026-12-02)
READABLE_VERSIONS = (1, 2)
MAX_IMPORT_BYTES = 64 * 1024 * 1024
MAX_MESSAGES = 500_000
STATUSES = frozenset(s.value for s in MessageStatus)
T = TypeVar("T")


# ----- export --------------------------------------------------------------------------


def export_json(db: Database, conversation_ids: list[int] | None = None) -> dict:
    with db.begin() as s:
        query = select(Conversation).where(Conversation.deleted_at.is_(None), Conversation.origin == CHAT_ORIGIN) \
            .order_by(Conversation.id)
        if conversation_ids is not None:
            query = query.where(Conversation.id.in_(conversation_ids))
        convs = list(s.scalars(query))
        presets = {p.id: p for p in s.scalars(select(Preset))}
        attached = attachments_by_message(s, [c.id for c in convs])
        out = [_conversation_json(s, c, presets.get(c.preset_id), attached) for c in convs]
        grouped = sorted({c.comparison_id for c in convs if c.comparison_id is not None})
        comparisons = [_comparison_json(s.get(Comparison, i)) for i in grouped]
        # Only the documents these conversations attach, each once however often attached.
        documents = documents_json(s, {a["sha256"] for listed in attached.values() for a in listed})
    data = {"format": FORMAT, "version": VERSION, "exported_at": _iso(datetime.now(timezone.utc)),
            "conversations": out, "documents": documents}
    if comparisons:  # optional, so files without comparisons read as before
        data["comparisons"] = comparisons
    return data


def _comparison_json(comp: Comparison) -> dict:
    return {"id": comp.id, "title": comp.title, "created_at": _iso(comp.created_at),
            "settings": json.loads(comp.settings_json or "{}")}


def _conversation_json(s, conv: Conversation, preset: Preset | None, attached: dict[int, list[dict]]) -> dict:
    rows = s.scalars(select(Message).where(Message.conversation_id == conv.id).order_by(Message.id))
    messages = tree_order(list(rows), key=lambda m: m.id, parent=lambda m: m.parent_id)
    return {
        "id": conv.id,
        "title": conv.title,
        "comparison": conv.comparison_id,
        "created_at": _iso(conv.created_at),
        "updated_at": _iso(conv.updated_at),
        "model": conv.model_ref,
        "preset": None if preset is None else {
            "name": preset.name, "system_prompt": preset.system_prompt, "sampling": json.loads(preset.sampling_json),
        },
        "sampling": json.loads(conv.sampling_json or "{}"),
        "pinned": bool(conv.pinned),
        "archived": bool(conv.archived),
        "active_message": conv.active_message_id,
        "messages": [
            {
                "id": m.id,
                "parent": m.parent_id,
                "role": m.role,
                "content": m.content,
                "status": m.status,
                "error": m.error_text,
                **{k: getattr(m, k) for k in STATS},
                "model": m.model,
                "created_at": _iso(m.created_at),
                **({"attachments": attached[m.id]} if m.id in attached else {}),
                **({"sources": json.loads(m.sources_json)} if m.sources_json else {}),
                **({"tool": json.loads(m.tool_json)} if m.tool_json else {}),
            }
            for m in messages
        ],
    }


def tree_order(items: list[T], key: Callable[[T], Any], parent: Callable[[T], Any]) -> list[T]:
    """items with every parent before its children: depth first from the roots, siblings
    in their given order. Creation order is not enough: a system prompt added to a chat
    later becomes the parent of messages older than itself. Items whose parent is not among
    them, or that descend from themselves, are left out (the caller can tell by the length)."""
    children: dict[Any, list[T]] = {}
    keys = {key(item) for item in items}
    roots = []
    for item in items:
        up = parent(item)
        if up is None or up not in keys:
            if up is None:
                roots.append(item)
        else:
            children.setdefault(up, []).append(item)
    ordered: list[T] = []
    stack = roots[::-1]
    while stack:  # not recursive: a chat may be thousands of messages deep
        item = stack.pop()
        ordered.append(item)
        stack.extend(reversed(children.get(key(item), ())))
    return ordered


# ----- import --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImportResult:
    conversation_ids: list[int]
    messages: int




def import_file(db: Database, path: Path, remap: SettingsRemap | None = None) -> ImportResult:
    path = Path(path)
    raw = _read_bounded(path)
    try:
        data = json.loads(raw.decode("utf-8-sig"))  # a byte-order mark is fine
    except UnicodeDecodeError:
        raise ImportRejected(f"{path.name} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ImportRejected(f"{path.name} is not valid JSON (line {exc.lineno}: {exc.msg}); truncated?") from None
    except RecursionError:  # Python's parser recurses per level: a hostile file, not an export
        raise ImportRejected(f"{path.name} is nested too deeply to be a Chorus export") from None
    return import_data(db, data, remap)


def _read_bounded(path: Path) -> bytes:
    """The file's bytes, refused past MAX_IMPORT_BYTES. Counted while read, not taken from
    stat(): a device or a pipe (/dev/zero, <(cmd)) says it holds 0 bytes and may never end."""
    try:
        size = path.stat().st_size
        if size > MAX_IMPORT_BYTES:  # a regular file too large: said without reading it
            raise ImportRejected(f"{path.name} is {size:,} bytes; the limit is {MAX_IMPORT_BYTES:,}")
        with path.open("rb") as file:
            raw = file.read(MAX_IMPORT_BYTES + 1)
    except IsADirectoryError:
        raise ImportRejected(f"{path} is a folder, not a file: give the export file itself") from None
    except OSError as exc:  # missing, not readable (permissions), an I/O error
        raise ImportRejected(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_IMPORT_BYTES:
        raise ImportRejected(f"{path} holds more than {MAX_IMPORT_BYTES:,} bytes; the limit is "
                             f"{MAX_IMPORT_BYTES:,}")
    return raw


def import_data(db: Database, data: Any, remap: SettingsRemap | None = None) -> ImportResult:
    conversations, documents = _validate(data)
    ids = write_import(db, conversations, data.get("comparisons", []), remap, documents)
    return ImportResult(ids, sum(len(conv["messages"]) for conv in conversations))


def _validate(data: Any) -> tuple[list[dict], list[NewDocument]]:
    """The file's conversations, checked whole; each a copy whose messages are in tree
    order (parents first, as the writer needs them) and whose active message is named.
    And the documents their messages attach."""
    _require(isinstance(data, dict), "the file must hold a JSON object")
    _require(data.get("format") == FORMAT, f'"format" must be "{FORMAT}"')
    version = data.get("version")
    _require(version in READABLE_VERSIONS and not isinstance(version, bool),
             f"unsupported version {version!r} (this Chorus reads {' and '.join(map(str, READABLE_VERSIONS))})")
    convs = data.get("conversations")
    _require(isinstance(convs, list), '"conversations" must be a list')
    groups = _validate_comparisons(data.get("comparisons", []))
    documents = validate_documents(data.get("documents", []))
    total = 0
    seen: set = set()
    ordered = []
    for i, conv in enumerate(convs):
        where = f"conversation {i + 1}"
        ordered.append(_validate_conversation(conv, where, documents))
        total += len(conv["messages"])
        _require(total <= MAX_MESSAGES, f"more than {MAX_MESSAGES:,} messages")
        ident = conv.get("id")
        _require(ident is None or (_is_id(ident) and ident not in seen), f"{where}: id must be a unique number or text")
        seen.add(ident)
        group = conv.get("comparison")
        _require(group is None or (_is_id(group) and group in groups),
                 f"{where}: comparison {group!r} is not in the file")
    _require_unicode(data)
    return ordered, list(documents.values())


def _validate_comparisons(comparisons: Any) -> set:
    _require(isinstance(comparisons, list), '"comparisons" must be a list')
    ids: set = set()
    for i, comp in enumerate(comparisons):
        where = f"comparison {i + 1}"
        _require(isinstance(comp, dict), f"{where} must be an object")
        _require(_is_id(comp.get("id")) and comp["id"] not in ids, f"{where}: id must be a unique number or text")
        _require(isinstance(comp.get("title", ""), str), f"{where}: title must be text")
        _require(isinstance(comp.get("settings", {}), dict), f"{where}: settings must be an object")
        if "created_at" in comp:
            parse_time(comp["created_at"], f"{where}: created_at")
        ids.add(comp["id"])
    return ids


def _validate_conversation(conv: Any, where: str, documents: dict[str, NewDocument]) -> dict:
    _require(isinstance(conv, dict), f"{where} must be an object")
    _require(isinstance(conv.get("title", ""), str), f"{where}: title must be text")
    _require(_is_text_or_none(conv.get("model")), f"{where}: model must be text")
    for key in ("created_at", "updated_at"):
        if key in conv:
            parse_time(conv[key], f"{where}: {key}")
    _require(isinstance(conv.get("sampling", {}), dict), f"{where}: sampling must be an object")
    for flag in ("pinned", "archived"):
        _require(isinstance(conv.get(flag, False), bool), f"{where}: {flag} must be true or false")
    preset = conv.get("preset")
    _require(preset is None or (isinstance(preset, dict) and isinstance(preset.get("name"), str)
             and isinstance(preset.get("system_prompt", ""), str)
             and isinstance(preset.get("sampling", {}), dict)), f"{where}: preset must have a name")
    messages = conv.get("messages")
    _require(isinstance(messages, list), f"{where}: messages must be a list")
    seen: set = set()
    for j, m in enumerate(messages):
        _validate_message(m, seen, f"{where}, message {j + 1}")
        validate_message_documents(m, documents, f"{where}, message {j + 1}")
        seen.add(m["id"])
    ordered = _parents_first(messages, seen, where)
    active = conv.get("active_message")
    _require(active is None or (_is_id(active) and active in seen),
             f"{where}: active_message {active!r} is not one of its messages")
    if active is None and messages:
        active = messages[-1]["id"]  # none named: the last message as the file lists them
    return {**conv, "messages": ordered, "active_message": active}


def _parents_first(messages: list[dict], ids: set, where: str) -> list[dict]:
    """Any order whose parents are in the file is accepted (older Chorus exported in
    creation order, where a system prompt added later follows its children)."""
    for j, m in enumerate(messages):
        parent = m.get("parent")
        _require(parent is None or parent in ids,
                 f"{where}, message {j + 1}: parent {parent!r} is not a message of the same conversation")
    ordered = tree_order(messages, key=lambda m: m["id"], parent=lambda m: m.get("parent"))
    if len(ordered) < len(messages):
        placed = {id(m) for m in ordered}
        j, m = next((j, m) for j, m in enumerate(messages) if id(m) not in placed)
        _require(False, f"{where}, message {j + 1}: parent {m['parent']!r} leads in a loop that never "
                        "reaches a first message")
    return ordered


def _validate_message(m: Any, seen: set, where: str) -> None:
    _require(isinstance(m, dict), f"{where} must be an object")
    _require(_is_id(m.get("id")), f"{where}: id must be a number or text")
    _require(m["id"] not in seen, f"{where}: duplicate id {m['id']!r}")
    _require(m.get("parent") is None or _is_id(m.get("parent")), f"{where}: parent must be a message id or null")
    _require(m.get("role") in ROLES, f"{where}: role must be one of {ROLES}")
    _require(isinstance(m.get("content"), str), f"{where}: content must be text")
    status = m.get("status", "complete")
    _require(isinstance(status, str) and status in STATUSES,
             f"{where}: unknown status {status!r}")
    for key in ("error", "model"):
        _require(_is_text_or_none(m.get(key)), f"{where}: {key} must be text")
    for key in STATS:
        _require(_is_stat(m.get(key)), f"{where}: {key} must be a number of 0 or more")
    if "created_at" in m:
        parse_time(m["created_at"], f"{where}: created_at")
    try:
        tool_json_of_file(m.get("tool"))
    except ValueError as exc:
        _require(False, f"{where}: tool {exc}")


def _require_unicode(data: dict) -> None:
    """Every string must be one UTF-8 can hold. JSON may escape a lone surrogate ("\\ud800"),
    which is no character at all; SQLite's driver fails on it only when that row is written,
    so all text is checked here first, at once (one encode of the whole file's text)."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start:exc.end]
        _require(False, f"{_where_unencodable(data)} has text that is not valid Unicode (a lone surrogate, {bad!r})")


def _where_unencodable(data: dict) -> str:
    for i, conv in enumerate(data["conversations"]):
        if not _encodable(conv):
            for j, message in enumerate(conv["messages"]):
                if not _encodable(message):
                    return f"conversation {i + 1}, message {j + 1}"
            return f"conversation {i + 1}"
    for i, comp in enumerate(data.get("comparisons", [])):
        if not _encodable(comp):
            return f"comparison {i + 1}"
    for i, doc in enumerate(data.get("documents", [])):
        if not _encodable(doc):
            return f"document {i + 1}"
    return "the file"


def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_stat(value: Any) -> bool:
    """A count or a time: never negative (no reply has -5 tokens or a first token before its
    request), finite, and small enough for SQLite's 64-bit integers."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                             and 0 <= value < 2**63 and math.isfinite(value))  # the range first: 10**400 is no float


def _is_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _is_text_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()
