"""A chat database already at head, for tests that need an empty one and are not about
creating it: the migrations run once per test session (~0.15 s each time on the 2-core VM,
paid by hundreds of tests), then each test gets a copy of that file.

The copy goes through the real `open_database` afterwards: its revision is read and found
at head, so nothing is migrated and no backup is made, as for any database opened a second
time. The migrations themselves (from nothing and from each old revision) are the subject of
tests/storage/test_storage_migrations.py, which makes its own files."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from storage import DEFAULT_FILENAME, open_database
from storage.private_files import create_private, private_folder

_template: Path | None = None


def _migrated_template() -> Path:
    global _template
    if _template is None:
        folder = Path(tempfile.mkdtemp(prefix="chorus-template-db-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / DEFAULT_FILENAME
        open_database(path).close()  # closing the last connection checkpoints the WAL into the file
        _template = path
    return _template


def seed_database(path: Path) -> Path:
    """An empty database at head at path, made as Chorus makes one (0600, in 0700 folders),
    unless a file is there already (a test reopening its own data folder keeps its chats)."""
    path = Path(path)
    if path.exists():
        return path
    private_folder(path.parent)
    create_private(path)
    shutil.copyfile(_migrated_template(), path)  # into the file made above: its mode stays 0600
    return path


def seed_data_dir(data_dir: Path) -> Path:
    """A data folder whose chat database is already at head (see seed_database)."""
    seed_database(Path(data_dir) / DEFAULT_FILENAME)
    return Path(data_dir)
