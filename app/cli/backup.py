"""`chorus backup PATH`: a consistent copy of the chat database, safe while the app runs."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from app.cli.command import add_command
from storage import DEFAULT_FILENAME
from storage.backup import backup_database


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backup = add_command(sub, "backup", run_backup,
                         help="copy the chat database consistently (safe while the app runs)")
    backup.add_argument("path", help="new file, or a folder for a dated file")


def run_backup(args: argparse.Namespace, base: Path) -> int:
    target = Path(args.path).expanduser()
    if target.is_dir():  # a folder: a dated file name inside it
        target = target / f"chorus-{datetime.now():%Y%m%d-%H%M%S}.db"
    copy = backup_database(base / DEFAULT_FILENAME, target)
    print(f"backed up {base / DEFAULT_FILENAME} to {copy} ({copy.stat().st_size:,} bytes)")
    return 0
