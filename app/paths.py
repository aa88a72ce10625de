"""Where Chorus keeps its files: one data folder, overridable for tests and portable use.

The folder and what Chorus keeps in it are the user's alone (0700 folders, 0600 files):
the chats, the attached documents' text and the prompt cache's KV state are private. What
older versions left readable by every local user (0755/0644) is tightened on each start.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

from storage import DEFAULT_FILENAME
from storage.private_files import PRIVATE_FILE, PRIVATE_FOLDER, private_folder, private_opener

__all__ = ["PRIVATE_FILE", "DataFolderError", "data_dir", "files_dir", "kv_cache_dir", "models_dir",
           "private_folder", "private_opener", "tighten"]

ENV_DATA_DIR = "CHORUS_DATA_DIR"
MODELS, KV_CACHE, FILES = "models", "kv-cache", "files"


class DataFolderError(RuntimeError):
    """The data folder (or one Chorus keeps in it) cannot be created: one line saying so."""


def data_dir(override: str | os.PathLike | None = None) -> Path:
    """--data-dir, else $CHORUS_DATA_DIR, else the platform's user data folder; made
    private (and what is in it from older versions tightened)."""
    chosen = override or os.environ.get(ENV_DATA_DIR)
    path = Path(chosen) if chosen else Path(platformdirs.user_data_dir("chorus", appauthor=False))
    _make(path, "the data folder")
    tighten(path)
    return path


def models_dir(base: Path) -> Path:
    path = base / MODELS
    _make(path, "the models folder")
    return path


def kv_cache_dir(base: Path) -> Path:
    """The disk prompt cache (inference/kv/disk_store.py): created by the engine when it saves."""
    return base / KV_CACHE


def files_dir(base: Path) -> Path:
    """The server's Files API (batch inputs and outputs): made by the server when it starts."""
    return base / FILES


def tighten(base: Path) -> None:
    """Group and other permissions taken off the data folder, the chat database and its
    -wal, -shm and safety copies, and what is under models/, kv-cache/ and files/. Best effort: a
    file system without modes, a read-only one or a file not the user's keeps its own; a
    symbolic link is never followed (a model linked from elsewhere is not Chorus's)."""
    _tighten(base)
    for entry in base.glob(f"{DEFAULT_FILENAME}*"):
        _tighten(entry)
    for sub in (MODELS, KV_CACHE, FILES):
        _tighten_tree(base / sub)


def _tighten_tree(folder: Path) -> None:
    """A folder private already was made or tightened by this version, and what it holds
    too: not walked again (each start would stat every cache file: 45 ms for 2,000)."""
    if not _tighten(folder):
        return
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _tighten_tree(Path(entry.path))
            else:
                _tighten(Path(entry.path))


def _tighten(path: Path) -> bool:
    """Whether path was open to others and is not any more."""
    try:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode) or not stat.S_IMODE(mode) & 0o077:
            return False
        path.chmod(stat.S_IMODE(mode) & PRIVATE_FOLDER)  # the user's own bits kept, the others' taken off
    except OSError:
        return False
    return True


def _make(path: Path, what: str) -> None:
    try:
        private_folder(path)
    except OSError as exc:
        raise DataFolderError(f"{what} {path} cannot be created: {exc.strerror or exc}; "
                              f"choose another data folder with --data-dir or ${ENV_DATA_DIR}") from None
