"""Presets, comparisons and app settings (the model library's profiles: storage/library.py)."""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import select

from storage.database import Database
from storage.errors import NotFoundError, StorageError
from storage.records import ComparisonRecord, PresetRecord
from storage.repository import _aware
from storage.schema import Comparison, Conversation, Preset, Setting


def _preset(p: Preset) -> PresetRecord:
    return PresetRecord(p.id, p.name, p.system_prompt, json.loads(p.sampling_json), _aware(p.created_at))


class CatalogRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    # ----- presets -----------------------------------------------------------------

    def create_preset(self, name: str, system_prompt: str, sampling: dict | None = None) -> PresetRecord:
        if not name.strip():
            raise StorageError("a preset needs a name")
        with self.db.begin() as s:
            if s.scalar(select(Preset.id).where(Preset.name == name)) is not None:
                raise StorageError(f"a preset named {name!r} already exists")
            preset = Preset(name=name, system_prompt=system_prompt, sampling_json=json.dumps(sampling or {}))
            s.add(preset)
            s.flush()
            return _preset(preset)

    def list_presets(self) -> list[PresetRecord]:
        with self.db.begin() as s:
            return [_preset(p) for p in s.scalars(select(Preset).order_by(Preset.name))]

    def get_preset(self, preset_id: int) -> PresetRecord:
        with self.db.begin() as s:
            return _preset(self._get(s, Preset, preset_id))

    def update_preset(self, preset_id: int, **fields) -> PresetRecord:
        with self.db.begin() as s:
            preset = self._get(s, Preset, preset_id)
            if "name" in fields:
                preset.name = fields.pop("name")
            if "system_prompt" in fields:
                preset.system_prompt = fields.pop("system_prompt")
            if "sampling" in fields:
                preset.sampling_json = json.dumps(fields.pop("sampling") or {})
            if fields:
                raise StorageError(f"cannot update preset field(s): {', '.join(sorted(fields))}")
            return _preset(preset)

    def delete_preset(self, preset_id: int) -> None:
        """Conversations that used it keep their messages; their preset becomes none."""
        with self.db.begin() as s:
            s.delete(self._get(s, Preset, preset_id))

    # ----- comparisons ---------------------------------------------------------------

    def create_comparison(
        self, title: str, conversation_ids: list[int], settings: dict | None = None
    ) -> ComparisonRecord:
        with self.db.begin() as s:
            comp = Comparison(title=title, settings_json=json.dumps(settings or {}))
            s.add(comp)
            s.flush()
            for conv_id in conversation_ids:
                self._get(s, Conversation, conv_id).comparison_id = comp.id
            return ComparisonRecord(comp.id, title, settings or {}, comp.created_at, tuple(conversation_ids))

    def get_comparison(self, comparison_id: int) -> ComparisonRecord:
        with self.db.begin() as s:
            comp = self._get(s, Comparison, comparison_id)
            ids = tuple(s.scalars(
                select(Conversation.id).where(Conversation.comparison_id == comparison_id).order_by(Conversation.id)
            ))
            return ComparisonRecord(comp.id, comp.title, json.loads(comp.settings_json), _aware(comp.created_at), ids)

    def update_comparison(self, comparison_id: int, title: str | None = None, settings: dict | None = None) -> None:
        with self.db.begin() as s:
            comp = self._get(s, Comparison, comparison_id)
            if title is not None:
                comp.title = title
            if settings is not None:
                comp.settings_json = json.dumps(settings)

    def list_comparisons(self) -> list[ComparisonRecord]:
        """Comparisons with at least one conversation not deleted, most recently active
        first (a comparison is as recent as its newest conversation)."""
        with self.db.begin() as s:
            rows = s.execute(
                select(Comparison, Conversation.id, Conversation.updated_at)
                .join(Conversation, Conversation.comparison_id == Comparison.id)
                .where(Conversation.deleted_at.is_(None))
                .order_by(Conversation.id)
            ).all()
            found: dict[int, tuple[Comparison, list[int], datetime]] = {}
            for comp, conv_id, updated in rows:
                _, ids, newest = found.setdefault(comp.id, (comp, [], updated))
                ids.append(conv_id)
                found[comp.id] = (comp, ids, max(newest, updated))
            ordered = sorted(found.values(), key=lambda item: item[2], reverse=True)
            return [
                ComparisonRecord(
                    c.id, c.title, json.loads(c.settings_json), _aware(c.created_at), tuple(ids), _aware(newest)
                )
                for c, ids, newest in ordered
            ]

    # ----- settings ------------------------------------------------------------------

    def get_setting(self, key: str, default=None):
        with self.db.begin() as s:
            row = s.get(Setting, key)
            return default if row is None else json.loads(row.value_json)

    def set_setting(self, key: str, value) -> None:
        encoded = json.dumps(value)
        with self.db.begin() as s:
            row = s.get(Setting, key)
            if row is None:
                s.add(Setting(key=key, value_json=encoded))
            else:
                row.value_json = encoded

    @staticmethod
    def _get(s, model, ident):
        row = s.get(model, ident)
        if row is None:
            raise NotFoundError(f"{model.__tablename__[:-1].replace('_', ' ')} {ident} does not exist")
        return row
