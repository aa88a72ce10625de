"""Images pasted into a composer have no file of their own; to outlive a restart with the
chat's draft they are written as PNG files under the data folder's drafts/ (a folder per
chat, the user's alone), and the draft lists them as its files, read again at the start
like any attached file. What no draft refers to any more is removed at the next save."""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from storage.private_files import PRIVATE_FILE, private_folder

DRAFTS_FOLDER = "drafts"


def keep_pasted(folder: Path, pasted: Mapping[int, Sequence[tuple[str, bytes]]],
                referenced: Collection[Path] = ()) -> dict[int, list[Path]]:
    """Writes each chat's pasted images (its chip's name, the PNG's bytes) into
    folder/<chat id>/ and returns their files by chat. Files there that neither this save
    writes nor a draft still refers to (referenced: a restored image is a file chip now)
    are removed, and so are the folders of chats left with none."""
    kept: dict[int, list[Path]] = {}
    for chat, images in pasted.items():
        if images:
            private_folder(folder / str(chat))
        kept[chat] = [_write(folder / str(chat) / _safe_name(name), data) for name, data in images]
    keep = {p.resolve() for p in referenced} | {p.resolve() for files in kept.values() for p in files}
    _remove_all_but(folder, keep)
    return kept


def _safe_name(name: str) -> str:
    """A chip's name as one file name: no folders, never hidden."""
    return Path(name).name.lstrip(".") or "pasted image.png"


def _write(path: Path, data: bytes) -> Path:
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return path  # saved before: the draft is saved a moment after every key
    part = path.with_name(path.name + ".part")
    with open(part, "wb", opener=lambda p, flags: os.open(p, flags, PRIVATE_FILE)) as out:
        out.write(data)
    part.replace(path)  # whole or not at all
    return path


def _remove_all_but(folder: Path, keep: set[Path]) -> None:
    if not folder.is_dir():
        return
    for chat in folder.iterdir():
        if not chat.is_dir():
            continue
        for file in chat.iterdir():
            if file.resolve() not in keep:
                file.unlink(missing_ok=True)
        if not any(chat.iterdir()):
            shutil.rmtree(chat, ignore_errors=True)
