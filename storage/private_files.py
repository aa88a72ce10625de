"""The chat database and its copies are the user's alone (0600, in 0700 folders), as SSH
and browsers keep theirs: they hold every chat and attached document.

SQLite creates a new database file with 0644 (less the umask) and gives its -wal, -shm
and -journal files the database file's own mode; so the file is made here first, private,
and SQLite opens it (an empty file is a new database to SQLite). The process umask is
left alone: it would also reach what Chorus writes for the user elsewhere (an export
saved on the desktop) and the MCP servers it starts, which write the user's own files.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_FOLDER = 0o700
PRIVATE_FILE = 0o600


def private_folder(path: Path) -> None:
    """The folder and any missing parents, each made 0700 (mkdir's mode reaches only the last)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=PRIVATE_FOLDER, exist_ok=True)


def private_opener(path: str, flags: int) -> int:
    """open(path, mode, opener=private_opener): a file it creates is the user's alone."""
    return os.open(path, flags, PRIVATE_FILE)


def create_private(path: Path) -> None:
    """An empty file readable by the user alone, unless one is there already."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    except FileExistsError:
        pass
