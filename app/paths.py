"""Where Chorus keeps its files: one data folder, overridable for tests and portable use."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

ENV_DATA_DIR = "CHORUS_DATA_DIR"


def data_dir(override: str | os.PathLike | None = None) -> Path:
    """--data-dir, else $CHORUS_DATA_DIR, else the platform's user data folder."""
    chosen = override or os.environ.get(ENV_DATA_DIR)
    path = Path(chosen) if chosen else Path(platformdirs.user_data_dir("chorus", appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir(base: Path) -> Path:
    path = base / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def kv_cache_dir(base: Path) -> Path:
    """The disk prompt cache (inference/kv/disk_store.py): created by the engine when it saves."""
    return base / "kv-cache"
