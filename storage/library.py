"""The model library's records: GGUF model profiles with their source, last use and
per-model load settings (the model_profiles table, revision 0005).

A record is keyed by its name (unique) and found by its file's path too. What the
settings mean, and what is on disk, is the app's business (app/models/library.py).
"""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.database import Database
from storage.errors import NotFoundError, StorageError
from storage.records import ModelProfileRecord
from storage.repository import _aware
from storage.schema import ModelProfile, utcnow

SOURCES = ("catalog", "hub", "local")


def _record(p: ModelProfile) -> ModelProfileRecord:
    return ModelProfileRecord(
        p.id, p.name, p.kind, p.path, p.size_bytes, p.sha256, p.architecture,
        p.context_length, p.base_url, p.remote_model, json.loads(p.load_settings_json), _aware(p.created_at),
        p.source, p.hub_repo, _aware(p.last_used_at) if p.last_used_at is not None else None,
    )


class LibraryRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def records(self) -> list[ModelProfileRecord]:
        """Every GGUF profile, by name."""
        with self.db.begin() as s:
            rows = s.scalars(select(ModelProfile).where(ModelProfile.kind == "gguf").order_by(ModelProfile.name))
            return [_record(p) for p in rows]

    def by_name(self, name: str) -> ModelProfileRecord | None:
        with self.db.begin() as s:
            row = self._named(s, name)
            return _record(row) if row is not None else None

    def by_path(self, path: str) -> ModelProfileRecord | None:
        with self.db.begin() as s:
            row = self._at(s, path)
            return _record(row) if row is not None else None

    def record(self, name: str, path: str, source: str, *, hub_repo: str | None = None,
               sha256: str | None = None, size_bytes: int | None = None) -> ModelProfileRecord:
        """Create the record of the file at path, or update the one there is (found by
        path): a file downloaded again keeps its defaults and last use."""
        if source not in SOURCES:
            raise StorageError(f"a library source must be one of {SOURCES}, got {source!r}")
        if not name.strip() or not path:
            raise StorageError("a library entry needs a name and a path")
        with self.db.begin() as s:
            row = self._at(s, path)
            if row is None:
                if s.scalar(select(ModelProfile.id).where(ModelProfile.name == name)) is not None:
                    raise StorageError(f"a model named {name!r} is already in the library")
                row = ModelProfile(name=name, kind="gguf", path=path, load_settings_json="{}")
                s.add(row)
            row.source = source
            if hub_repo is not None or source != "hub":
                row.hub_repo = hub_repo
            row.sha256 = sha256 or row.sha256
            row.size_bytes = size_bytes if size_bytes is not None else row.size_bytes
            s.flush()
            return _record(row)

    def touch(self, path: str, when: datetime | None = None) -> bool:
        """Mark the file at path used now; False when it has no record."""
        with self.db.begin() as s:
            row = self._at(s, path)
            if row is None:
                return False
            row.last_used_at = when or utcnow()
            return True

    def set_load_settings(self, name: str, settings: dict) -> ModelProfileRecord:
        with self.db.begin() as s:
            row = self._named(s, name)
            if row is None:
                raise NotFoundError(f"no model named {name!r} in the library")
            row.load_settings_json = json.dumps(settings)
            s.flush()
            return _record(row)

    def delete(self, name: str) -> bool:
        """Forget the record; False when there was none."""
        with self.db.begin() as s:
            row = self._named(s, name)
            if row is None:
                return False
            s.delete(row)
            return True

    @staticmethod
    def _named(s: Session, name: str) -> ModelProfile | None:
        return s.scalar(select(ModelProfile).where(ModelProfile.kind == "gguf", ModelProfile.name == name))

    @staticmethod
    def _at(s: Session, path: str) -> ModelProfile | None:
        return s.scalar(select(ModelProfile).where(ModelProfile.kind == "gguf", ModelProfile.path == path)
                        .order_by(ModelProfile.id).limit(1))
