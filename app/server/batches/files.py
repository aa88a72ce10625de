"""The Files API's files: a folder of the data folder (`<data>/files`, 0700), each file its
bytes (`<id>.data`) and what OpenAI's file object says of it (`<id>.json`), both 0600.

Kept as files rather than in the chat database: a batch input may be 200 MB, written once
and read whole; in chorus.db it would be copied by every migration's safety copy and every
backup, and read into memory to be served. The description is written last, by rename, so a
file whose description exists is whole; a crash mid-upload leaves only a temporary file,
removed at the next start. Blocking calls: the routes run them in worker threads."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

from storage.private_files import private_folder, private_opener

ID_PREFIX = "file-"
_ID = re.compile(r"file-[A-Za-z0-9_-]{1,64}")
_PARTIAL = ".partial"


class FileTooLarge(ValueError):
    pass


@dataclass(frozen=True)
class StoredFile:
    id: str
    filename: str
    bytes: int
    created_at: int
    purpose: str

    def openai(self) -> dict:
        """OpenAI's file object (status and status_details are deprecated there, and fixed here)."""
        return {"id": self.id, "object": "file", "bytes": self.bytes, "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed", "expires_at": None,
                "status_details": None}


def new_file_id() -> str:
    return ID_PREFIX + uuid.uuid4().hex[:24]


def delete_file(folder: Path, file_id: str) -> bool:
    """Removes one whole file; False when there is none. Needs no FileStore: opening one
    removes the partial files, which a server running beside `chorus batch delete` may be
    writing."""
    if not _ID.fullmatch(file_id) or not (folder / f"{file_id}.json").exists():
        return False
    (folder / f"{file_id}.json").unlink(missing_ok=True)  # first: from here on it is gone
    (folder / f"{file_id}.data").unlink(missing_ok=True)
    return True


class FileStore:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        private_folder(folder)
        for partial in folder.glob(f"*{_PARTIAL}"):  # an upload or an output cut by a crash
            partial.unlink(missing_ok=True)

    def content(self, file_id: str) -> Path | None:
        """Where a whole file's bytes are; None when there is no such file."""
        return self._data(file_id) if self.get(file_id) is not None else None

    def get(self, file_id: str) -> StoredFile | None:
        if not _ID.fullmatch(file_id):
            return None
        try:
            return StoredFile(**json.loads(self._meta(file_id).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def all(self) -> list[StoredFile]:
        """Oldest first."""
        files = (self.get(path.stem) for path in self.folder.glob(f"{ID_PREFIX}*.json"))
        return sorted((f for f in files if f is not None), key=lambda f: (f.created_at, f.id))

    def save(self, source: BinaryIO, filename: str, purpose: str, limit: int) -> StoredFile:
        """An upload's bytes, copied from source (a spooled temporary file); FileTooLarge past limit."""
        file_id = new_file_id()
        partial = self._data(file_id).with_name(self._data(file_id).name + _PARTIAL)
        with open(partial, "wb", opener=private_opener) as out:
            shutil.copyfileobj(source, out, 1024 * 1024)
            size = out.tell()
        if size > limit:
            partial.unlink(missing_ok=True)
            raise FileTooLarge(f"the file is {size} bytes, over this server's limit of {limit} bytes")
        return self._publish(file_id, partial, filename, purpose)

    def write(self, file_id: str, filename: str, purpose: str, lines: Iterable[bytes]) -> StoredFile:
        """A file the server makes (a batch's output or errors), replacing one of that id."""
        partial = self._data(file_id).with_name(self._data(file_id).name + _PARTIAL)
        with open(partial, "wb", opener=private_opener) as out:
            for line in lines:
                out.write(line)
        return self._publish(file_id, partial, filename, purpose)

    def delete(self, file_id: str) -> bool:
        return delete_file(self.folder, file_id)

    def _publish(self, file_id: str, partial: Path, filename: str, purpose: str) -> StoredFile:
        stored = StoredFile(id=file_id, filename=filename, bytes=partial.stat().st_size, created_at=int(time.time()),
                            purpose=purpose)
        os.replace(partial, self._data(file_id))
        meta = self._meta(file_id).with_name(self._meta(file_id).name + _PARTIAL)
        with open(meta, "w", encoding="utf-8", opener=private_opener) as out:
            json.dump(asdict(stored), out)
        os.replace(meta, self._meta(file_id))
        return stored

    def _data(self, file_id: str) -> Path:
        return self.folder / f"{file_id}.data"

    def _meta(self, file_id: str) -> Path:
        return self.folder / f"{file_id}.json"
