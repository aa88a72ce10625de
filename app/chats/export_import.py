"""Chats to and from files in the CLI's formats: `chorus export` / `chorus import` and the
app's File → Export… / Import… both go through here, so the two cannot drift apart."""

from __future__ import annotations

import json
import os
from pathlib import Path

from app.chats.markdown_export import export_markdown
from app.compare.export import comparison_markdown
from app.compare.state import ComparisonState
from storage import CatalogRepository, ChatRepository
from storage.chat_file_format import ImportResult, export_json, import_file
from storage.database import Database

FORMATS = ("json", "md")


def export_text(db: Database, repo: ChatRepository, fmt: str, conversation_ids: list[int] | None = None,
                comparison_id: int | None = None) -> tuple[str, list[int]]:
    """The export's text and the conversations in it. No ids: every conversation (archived
    too) but those nothing was sent in; a comparison: its panes side by side (md) or its
    conversations as a group (json). A wrong id raises NotFoundError."""
    catalog = CatalogRepository(db)
    if comparison_id is not None:
        ids = list(catalog.get_comparison(comparison_id).conversation_ids)
    elif conversation_ids:
        ids = list(conversation_ids)
    else:
        ids = [c.id for c in repo.list_conversations(include_archived=True, include_unused=False)]
    for conv_id in ids:
        repo.get_conversation(conv_id)  # a clear error for a wrong id
    if fmt == "json":
        return json.dumps(export_json(db, ids), ensure_ascii=False, indent=1), ids
    if comparison_id is not None:
        return comparison_markdown(repo, catalog, comparison_id), ids
    return export_markdown(repo, ids), ids


def write_whole(path: str | Path, text: str) -> None:
    """Whole or not at all: written to a .part file renamed into place, so a reader (or a
    crash) never sees half a file."""
    target = Path(path)
    part = target.with_name(target.name + ".part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, target)


def import_chats(db: Database, path: str | Path) -> ImportResult:
    """A Chorus JSON export, validated whole before anything is written: ImportRejected
    (a clear message) and nothing written when the file is malformed."""
    return import_file(db, Path(path), remap=ComparisonState.remap_settings)
