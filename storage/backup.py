"""A consistent copy of a chat database while it may be in use (SQLite's online backup).

Copying the file alone can miss recent commits still in the -wal file, or catch a page
half written; the backup API reads through SQLite's own locking and WAL.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from storage.errors import StorageError
from storage.private_files import create_private


def backup_database(source: Path, target: Path) -> Path:
    """Copy source to target (which must not exist yet); checked with quick_check. A failed
    backup leaves nothing under the target's name."""
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise StorageError(f"no chat database at {source}")
    if target.exists():
        raise StorageError(f"{target} already exists; choose a new file name")
    partial = target.with_name(target.name + ".partial")
    try:
        partial.unlink(missing_ok=True)  # a killed backup's leftover, perhaps not private
        create_private(partial)  # a copy of every chat: as private as the database, wherever it goes
        # Read-only: a backup must never create or change the source. (closing(): a
        # sqlite3 connection's own `with` only commits, it does not close.)
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
        with closing(src), closing(sqlite3.connect(partial)) as dst:
            src.backup(dst)
            # One self-contained file (the source's WAL mode would leave -wal/-shm beside it).
            dst.execute("PRAGMA journal_mode=DELETE")
            verdict = dst.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise StorageError(f"the backup of {source.name} failed its check: {verdict}")
        partial.replace(target)
    except sqlite3.Error as exc:
        raise StorageError(f"could not back up {source.name}: {exc}") from None
    except OSError as exc:
        raise StorageError(f"could not back up {source.name} to {target}: {exc.strerror or exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    return target
