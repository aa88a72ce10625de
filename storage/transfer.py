"""Export conversations to Markdown and to JSON, and import that JSON back.

The JSON format (version 1) is documented in README.md ("Chat files"). An import is
validated completely before anything is written, then written in one transaction:
a malformed, truncated or oversized file changes nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import select

from storage.database import Database
from storage.errors import ImportRejected
from storage.records import ROLES, ActivePath, MessageStatus
from storage.repository import ChatRepository
from storage.schema import Comparison, Conversation, Message, Preset

FORMAT = "chorus-chats"
VERSION = 1
MAX_IMPORT_BYTES = 64 * 1024 * 1024
MAX_MESSAGES = 500_000
STATS = ("prompt_tokens", "completion_tokens", "ttft_s", "tokens_per_s")


# ----- export --------------------------------------------------------------------------


def export_json(db: Database, conversation_ids: list[int] | None = None) -> dict:
    with db.begin() as s:
        query = select(Conversation).where(Conversation.deleted_at.is_(None)).order_by(Conversation.id)
        if conversation_ids is not None:
            query = query.where(Conversation.id.in_(conversation_ids))
        convs = list(s.scalars(query))
        presets = {p.id: p for p in s.scalars(select(Preset))}
        out = [_conversation_json(s, c, presets.get(c.preset_id)) for c in convs]
        grouped = sorted({c.comparison_id for c in convs if c.comparison_id is not None})
        comparisons = [_comparison_json(s.get(Comparison, i)) for i in grouped]
    data = {"format": FORMAT, "version": VERSION, "exported_at": _iso(datetime.now(timezone.utc)), "conversations": out}
    if comparisons:  # optional, so files without comparisons read as before
        data["comparisons"] = comparisons
    return data


def _comparison_json(comp: Comparison) -> dict:
    return {"id": comp.id, "title": comp.title, "created_at": _iso(comp.created_at),
            "settings": json.loads(comp.settings_json or "{}")}


def _conversation_json(s, conv: Conversation, preset: Preset | None) -> dict:
    messages = s.scalars(select(Message).where(Message.conversation_id == conv.id).order_by(Message.id))
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
            }
            for m in messages
        ],
    }


def export_markdown(repo: ChatRepository, conversation_ids: list[int]) -> str:
    return "\n\n---\n\n".join(_markdown(repo.active_path(cid)) for cid in conversation_ids) + "\n"


def _markdown(path: ActivePath) -> str:
    conv = path.conversation
    lines = [f"# {conv.title or 'Untitled chat'}", ""]
    meta = [f"created {conv.created_at:%Y-%m-%d %H:%M} UTC"]
    if conv.model_ref:
        meta.insert(0, f"model: {conv.model_ref}")
    lines += [f"_{' · '.join(meta)}_", ""]
    for m in path.messages:
        lines += [f"### {_heading(m)}", "", m.content, ""]
        if m.status is not MessageStatus.COMPLETE:
            lines += [f"_({m.status.value}{': ' + m.error_text if m.error_text else ''})_", ""]
        branch = path.branches.get(m.id)
        if branch and branch.count > 1:
            lines += [f"_(branch {branch.index} of {branch.count})_", ""]
    return "\n".join(lines).rstrip()


def _heading(m) -> str:
    title = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}[m.role]
    details = [d for d in (m.model if m.role == "assistant" else None,
                           f"{m.tokens_per_s:.1f} tok/s" if m.tokens_per_s else None) if d]
    return " · ".join([title, *details])


# ----- import --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImportResult:
    conversation_ids: list[int]
    messages: int


# (a comparison's settings, {conversation id in the file: id given on import}) -> settings;
# the app knows which settings name conversations, storage does not.
SettingsRemap = Callable[[dict, dict], dict]


def import_file(db: Database, path: Path, remap: SettingsRemap | None = None) -> ImportResult:
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ImportRejected(f"cannot read {path}: {exc.strerror}") from None
    if size > MAX_IMPORT_BYTES:
        raise ImportRejected(f"{path.name} is {size:,} bytes; the limit is {MAX_IMPORT_BYTES:,}")
    raw = path.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8-sig"))  # a byte-order mark is fine
    except UnicodeDecodeError:
        raise ImportRejected(f"{path.name} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ImportRejected(f"{path.name} is not valid JSON (line {exc.lineno}: {exc.msg}); truncated?") from None
    return import_data(db, data, remap)


def import_data(db: Database, data: Any, remap: SettingsRemap | None = None) -> ImportResult:
    conversations = _validate(data)
    ids: list[int] = []
    count = 0
    with db.begin() as s:
        comparisons = {c["id"]: _insert_comparison(s, c) for c in data.get("comparisons", [])}
        members: dict[Any, dict] = {key: {} for key in comparisons}
        for conv in conversations:
            new_id = _insert_conversation(s, conv, comparisons.get(conv.get("comparison")))
            ids.append(new_id)
            if conv.get("comparison") is not None:
                members[conv["comparison"]][conv.get("id")] = new_id
            count += len(conv["messages"])
        for key, row in comparisons.items():
            if remap is not None:
                row.settings_json = json.dumps(remap(json.loads(row.settings_json), members[key]))
    return ImportResult(ids, count)


def _insert_comparison(s, comp: dict) -> Comparison:
    row = Comparison(title=comp.get("title", ""), settings_json=json.dumps(comp.get("settings", {})),
                     created_at=_parse_time(comp.get("created_at"), "") or datetime.now(timezone.utc))
    s.add(row)
    s.flush()
    return row


def _validate(data: Any) -> list[dict]:
    _require(isinstance(data, dict), "the file must hold a JSON object")
    _require(data.get("format") == FORMAT, f'"format" must be "{FORMAT}"')
    _require(data.get("version") == VERSION,
             f"unsupported version {data.get('version')!r} (this Chorus reads {VERSION})")
    convs = data.get("conversations")
    _require(isinstance(convs, list), '"conversations" must be a list')
    groups = _validate_comparisons(data.get("comparisons", []))
    total = 0
    seen: set = set()
    for i, conv in enumerate(convs):
        where = f"conversation {i + 1}"
        total += _validate_conversation(conv, where)
        _require(total <= MAX_MESSAGES, f"more than {MAX_MESSAGES:,} messages")
        ident = conv.get("id")
        _require(ident is None or (_is_id(ident) and ident not in seen), f"{where}: id must be a unique number or text")
        seen.add(ident)
        group = conv.get("comparison")
        _require(group is None or (_is_id(group) and group in groups),
                 f"{where}: comparison {group!r} is not in the file")
    return convs


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
            _parse_time(comp["created_at"], f"{where}: created_at")
        ids.add(comp["id"])
    return ids


def _validate_conversation(conv: Any, where: str) -> int:
    _require(isinstance(conv, dict), f"{where} must be an object")
    _require(isinstance(conv.get("title", ""), str), f"{where}: title must be text")
    _require(_is_text_or_none(conv.get("model")), f"{where}: model must be text")
    for key in ("created_at", "updated_at"):
        if key in conv:
            _parse_time(conv[key], f"{where}: {key}")
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
        seen.add(m["id"])
    active = conv.get("active_message")
    _require(active is None or (_is_id(active) and active in seen),
             f"{where}: active_message {active!r} is not one of its messages")
    return len(messages)


def _validate_message(m: Any, seen: set, where: str) -> None:
    _require(isinstance(m, dict), f"{where} must be an object")
    _require(_is_id(m.get("id")), f"{where}: id must be a number or text")
    _require(m["id"] not in seen, f"{where}: duplicate id {m['id']!r}")
    _require(m.get("parent") is None or (_is_id(m.get("parent")) and m.get("parent") in seen),
             f"{where}: parent {m.get('parent')!r} must be an earlier message of the same conversation")
    _require(m.get("role") in ROLES, f"{where}: role must be one of {ROLES}")
    _require(isinstance(m.get("content"), str), f"{where}: content must be text")
    status = m.get("status", "complete")
    _require(isinstance(status, str) and status in {s.value for s in MessageStatus},
             f"{where}: unknown status {status!r}")
    for key in ("error", "model"):
        _require(_is_text_or_none(m.get(key)), f"{where}: {key} must be text")
    for key in STATS:
        value = m.get(key)
        _require(value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                   and abs(value) < 2**63 and math.isfinite(value)), f"{where}: {key} must be a number")
    if "created_at" in m:
        _parse_time(m["created_at"], f"{where}: created_at")


def _insert_conversation(s, conv: dict, comparison: Comparison | None = None) -> int:
    now = datetime.now(timezone.utc)
    row = Conversation(
        title=conv.get("title", ""),
        comparison_id=comparison.id if comparison is not None else None,
        created_at=_parse_time(conv.get("created_at"), "") or now,
        updated_at=_parse_time(conv.get("updated_at"), "") or now,
        model_ref=conv.get("model"),
        preset_id=_preset_id(s, conv.get("preset")),
        sampling_json=json.dumps(conv.get("sampling", {})),
        pinned=bool(conv.get("pinned", False)),
        archived=bool(conv.get("archived", False)),
    )
    s.add(row)
    s.flush()
    new_ids: dict = {}
    for m in conv["messages"]:
        status = m.get("status", "complete")
        msg = Message(
            conversation_id=row.id,
            parent_id=new_ids.get(m.get("parent")),
            role=m["role"],
            content=m["content"],
            # A message that was streaming when exported is not streaming here.
            status=MessageStatus.INTERRUPTED.value if status == MessageStatus.STREAMING.value else status,
            error_text=m.get("error"),
            model=m.get("model"),
            created_at=_parse_time(m.get("created_at"), "") or now,
            updated_at=now,
            **{k: m.get(k) for k in STATS},
        )
        s.add(msg)
        s.flush()
        new_ids[m["id"]] = msg.id
    active = conv.get("active_message")
    row.active_message_id = new_ids.get(active) if active is not None else (max(new_ids.values()) if new_ids else None)
    return row.id


def _preset_id(s, preset: dict | None) -> int | None:
    """Reuse a preset of the same name; create it otherwise."""
    if preset is None:
        return None
    existing = s.scalar(select(Preset).where(Preset.name == preset["name"]))
    if existing is not None:
        return existing.id
    row = Preset(name=preset["name"], system_prompt=preset.get("system_prompt", ""),
                 sampling_json=json.dumps(preset.get("sampling", {})))
    s.add(row)
    s.flush()
    return row.id


def _is_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _is_text_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ImportRejected(f"import rejected, nothing was written: {message}")


def _parse_time(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ImportRejected(f"import rejected, nothing was written: {where} is not an ISO date-time") from None
    # Stored as UTC wall time (SQLite keeps no zone), so other offsets are converted.
    return parsed.astimezone(timezone.utc) if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()
