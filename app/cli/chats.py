"""`chorus export`, `chorus import` and `chorus list` on the chat database."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.chats.export_import import export_text, import_chats, write_whole
from app.chats.store import open_chat_store
from app.cli.command import add_command
from storage import ImportRejected, NotFoundError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = add_command(sub, "export", run_export, help="export conversations to Markdown or JSON")
    export.add_argument("--format", choices=("md", "json"), default="json")
    export.add_argument("--conversation", type=int, action="append", help="conversation id (repeatable; default: all)")
    export.add_argument("--comparison", type=int, default=None,
                        help="one comparison: its panes side by side (md) or its conversations as a group (json)")
    export.add_argument("path", help="file to write ('-' for standard output)")

    imp = add_command(sub, "import", run_import, help="import conversations from a Chorus JSON export")
    imp.add_argument("path")

    add_command(sub, "list", run_list, help="list saved conversations")


def run_export(args: argparse.Namespace, base: Path) -> int:
    db, repo = open_chat_store(base)
    try:
        text, ids = export_text(db, repo, args.format, args.conversation, args.comparison)
    except NotFoundError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    finally:
        db.close()
    if args.path == "-":
        sys.stdout.write(text)
    else:
        write_whole(args.path, text)
        print(f"exported {len(ids)} conversation(s) to {args.path}", file=sys.stderr)
    return 0


def run_import(args: argparse.Namespace, base: Path) -> int:
    db, _repo = open_chat_store(base)
    try:
        result = import_chats(db, args.path)
    except ImportRejected as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    finally:
        db.close()
    print(f"imported {len(result.conversation_ids)} conversation(s), {result.messages} message(s): "
          f"ids {', '.join(map(str, result.conversation_ids))}")
    return 0


def run_list(args: argparse.Namespace, base: Path) -> int:
    db, repo = open_chat_store(base)
    try:
        for conv in repo.list_conversations(include_unused=False):
            pin = "*" if conv.pinned else " "
            print(f"{conv.id:>6} {pin} {conv.updated_at:%Y-%m-%d %H:%M}  {conv.title or '(untitled)'}")
    finally:
        db.close()
    return 0
