"""The model library: the GGUF models on this machine, where each came from, when it was
last used, its per-model load defaults, and deleting one.

Its entries are the catalog models that are installed (app/models/catalog.py), the Hub
downloads (record_download), the local files the user loaded (record_local / mark_used),
and any other GGUF file in the models folder. A file that vanished from disk stays listed,
as not installed, until it is removed. Records live in the chat database
(storage.LibraryRepository, the model_profiles table); the files are looked at here.

Removing deletes the model's files when they are Chorus's own (in the models folder:
catalog models and Hub downloads); a local file elsewhere, which the user only opened, is
forgotten but never deleted (files_to_delete says which files a removal deletes).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path

from app.models import catalog as model_catalog
from app.models.gguf_files import all_present, is_later_part, parts_of, size_on_disk
from app.models.hub_files import is_projector
from app.paths import models_dir
from inference import KV_TYPES, SPECULATIVE_MODES, LoadSettings, template_problem
from storage import DEFAULT_FILENAME, Database, LibraryRepository, open_database
from storage.records import ModelProfileRecord

log = logging.getLogger(__name__)

MIN_CTX = 64  # LoadSettings.validate's floor


class LibraryError(RuntimeError):
    """Bad input to the library or a model it does not have: one line, nothing changed."""


class ModelInUse(LibraryError):
    """The model is loaded; it cannot be removed until another one is."""


@dataclass(frozen=True)
class ModelDefaults:
    """Load settings of one model, applied when it loads; None: the app's own."""

    n_ctx: int | None = None
    n_gpu_layers: int | None = None
    n_threads: int | None = None
    chat_template: str | None = None  # Jinja text used instead of the GGUF's template
    speculative: str | None = None  # "off" | "lookup" | "draft" (LoadSettings.speculative)
    draft_model: str | None = None  # the draft model's file, for "draft" (LoadSettings.draft_model)
    kv_type: str | None = None  # "f16" | "q8_0" | "q4_0" (LoadSettings.kv_type)
    mmproj: str | None = None  # its vision projector's file (LoadSettings.mmproj): the model sees images

    def validate(self) -> None:
        """Raises LibraryError naming every bad value."""
        problems = [
            f"{label} must be an integer of at least {low}, got {value!r}"
            for label, value, low in (("context", self.n_ctx, MIN_CTX), ("GPU layers", self.n_gpu_layers, 0),
                                      ("threads", self.n_threads, 1))
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low)
        ]
        if self.chat_template is not None:
            problem = (template_problem(self.chat_template) if isinstance(self.chat_template, str)
                       else "the chat template must be text")
            if problem:
                problems.append(problem)
        if self.kv_type is not None and self.kv_type not in KV_TYPES:
            problems.append(f"kv_type must be one of {', '.join(KV_TYPES)}, got {self.kv_type!r}")
        if self.speculative is not None and self.speculative not in SPECULATIVE_MODES:
            problems.append(f"speculative must be one of {', '.join(SPECULATIVE_MODES)}, got {self.speculative!r}")
        if self.draft_model is not None and not isinstance(self.draft_model, str):
            problems.append("the draft model must be a file's path")
        if self.speculative == "draft" and not self.draft_model:
            problems.append("speculative decoding with a draft model needs the draft model")
        if self.mmproj is not None and not isinstance(self.mmproj, str):
            problems.append("the vision projector must be a file's path")
        if self.mmproj and self.speculative == "draft":  # LoadSettings.validate refuses them together
            problems.append("a vision projector does not go with a draft model yet; use lookup")
        if problems:
            raise LibraryError("; ".join(problems))

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_dict(cls, stored: dict) -> ModelDefaults:
        """From the stored JSON; a value that is not valid (edited by hand) is left out."""
        kept = {}
        for f in fields(cls):
            if f.name in stored:
                alone = {f.name: stored[f.name]}
                if f.name == "speculative":  # "draft" is valid with its draft model only
                    alone["draft_model"] = stored.get("draft_model")
                try:
                    cls(**alone).validate()
                except (LibraryError, TypeError):
                    log.warning("ignoring the stored model default %s=%r", f.name, stored[f.name])
                    continue
                kept[f.name] = stored[f.name]
        return cls(**kept)

    @property
    def empty(self) -> bool:
        return not self.as_dict()


def apply_defaults(settings: LoadSettings, defaults: ModelDefaults,
                   explicit: Collection[str] = ()) -> LoadSettings:
    """settings with the model's defaults on top, except the fields named in explicit (what
    the user chose for this load, e.g. a command-line flag: it wins over a default)."""
    chosen = {name: value for name, value in defaults.as_dict().items() if name not in explicit}
    if "n_threads" in chosen and "n_threads_batch" not in explicit:
        chosen["n_threads_batch"] = None  # follows n_threads (LoadSettings.threads_batch)
    for name in ("draft_model", "mmproj"):
        if name in chosen:
            chosen[name] = Path(chosen[name])
    return replace(settings, **chosen)


@dataclass(frozen=True)
class LibraryEntry:
    name: str  # what `chorus models rm/defaults` take: a catalog key, else the file's name
    path: Path  # the model's (first) file
    size_bytes: int  # all its files on disk
    source: str  # "catalog" | "hub" | "local"
    hub_repo: str | None
    last_used: datetime | None
    defaults: ModelDefaults
    installed: bool  # every file of it is on disk

    @property
    def sees_images(self) -> bool:
        """It loads with a vision projector (its default), so its chats show it their images."""
        return self.defaults.mmproj is not None


def _key(path: Path | str) -> Path:
    """One spelling per file: records and loaded paths are compared absolute and normalised.
    Not resolved: a link in the models folder is the model's entry (removing it deletes the
    link, never the file it points to elsewhere)."""
    return Path(os.path.abspath(Path(path).expanduser()))


@contextmanager
def open_library(data_dir: Path) -> Iterator[ModelLibrary]:
    """The library of a data folder, on its chat database, closed afterwards (commands)."""
    db = open_database(data_dir / DEFAULT_FILENAME)
    try:
        yield ModelLibrary(db, models_dir(data_dir))
    finally:
        db.close()


class ModelLibrary:
    def __init__(self, db: Database, models_dir: Path) -> None:
        self.records = LibraryRepository(db)
        self.models_dir = _key(models_dir)
        self.catalog = model_catalog.CATALOG  # what the catalog offers (tests swap in their own)

    # ----- reading ----------------------------------------------------------------------

    def entries(self) -> list[LibraryEntry]:
        """Every model of the library, by name. Never raises for what is on disk: a file
        that is gone or unreadable is an entry not installed."""
        records = {_key(r.path): r for r in self.records.records() if r.path}
        found: dict[Path, LibraryEntry] = {}
        for key, spec in self.catalog.items():
            path = _key(model_catalog.model_path(spec, self.models_dir))
            record = records.get(path)
            if record is not None or all_present(path):
                found[path] = self._entry(path, record, key, "catalog")
        for path, record in records.items():
            if path not in found:
                found[path] = self._entry(path, record, record.name, record.source or "local")
        names = {e.name for e in found.values()}
        for path in self._files_in_models_dir():
            if path not in found:  # put there by hand, or a download never recorded
                name = path.name if path.name not in names else str(path)
                found[path] = self._entry(path, None, name, "local")
        return sorted(found.values(), key=lambda e: e.name.lower())

    def listed(self, name: str) -> LibraryEntry | None:
        """The entry of entries() called name."""
        return next((e for e in self.entries() if e.name == name), None)

    def entry(self, name: str) -> LibraryEntry:
        """The entry called name, or a catalog model's (not installed); LibraryError if none."""
        found = self.listed(name)
        if found is not None:
            return found
        spec = self.catalog.get(name)
        if spec is not None:  # a catalog model not installed: its defaults can be set ahead
            return self._entry(_key(model_catalog.model_path(spec, self.models_dir)), None, name, "catalog")
        raise LibraryError(f"no model named {name!r} in the library; see `chorus models list`")

    def defaults_for(self, path: Path) -> ModelDefaults:
        record = self.records.by_path(str(_key(path)))
        return ModelDefaults.from_dict(record.load_settings) if record is not None else ModelDefaults()

    def files_to_delete(self, name: str) -> list[Path]:
        """What remove(name) deletes: the files there are of a model in the models folder;
        none of a local file elsewhere (it is only forgotten)."""
        entry = self.listed(name)
        if entry is None or not self._owned(entry.path):
            return []
        return [p for p in parts_of(entry.path) if p.exists()] + self._own_projector(entry)

    def _own_projector(self, entry: LibraryEntry) -> list[Path]:
        """The entry's projector when it came with it (a projector in the models folder) and
        no other model of the library uses it."""
        if entry.defaults.mmproj is None:
            return []
        projector = _key(entry.defaults.mmproj)
        shared = any(e.path != entry.path and e.defaults.mmproj is not None and _key(e.defaults.mmproj) == projector
                     for e in self.entries())
        owned = self._owned(projector) and is_projector(projector.name) and projector.is_file()
        return [projector] if owned and not shared else []

    # ----- recording ------------------------------------------------------------------------

    def record_download(self, path: Path, repo_id: str, sha256: str | None,
                        projector: Path | None = None) -> LibraryEntry:
        """A model downloaded from the Hub (its first part when split) into the models folder;
        projector: its vision projector, downloaded beside it, made its default (mmproj)."""
        key = _key(path)
        name = key.name if not self._name_taken(key.name, key) else f"{repo_id}/{key.name}"
        record = self.records.record(name, str(key), "hub", hub_repo=repo_id, sha256=sha256,
                                     size_bytes=size_on_disk(key))
        if projector is not None:
            self._set_projector(record.name, projector)
        return self._entry_at(key)

    def record_fetched(self, key: str) -> LibraryEntry:
        """A catalog model just fetched: recorded, with its projector as its default when
        it has one (a vision model from the Hub)."""
        spec = self.catalog[key]
        path = model_catalog.model_path(spec, self.models_dir)
        projector = model_catalog.projector_path(spec, self.models_dir)
        return self.record_projector(path, projector) if projector is not None else self.record_local(path)

    def record_projector(self, path: Path, projector: Path) -> LibraryEntry:
        """The model at path sees images with projector (a catalog model's, fetched with it):
        recorded as its default unless the user chose another."""
        entry = self.record_local(path)
        if entry.defaults.mmproj is None:
            self._set_projector(entry.name, projector)
        return self._entry_at(entry.path)

    def _set_projector(self, name: str, projector: Path) -> None:
        record = self.records.by_name(name)
        stored = ModelDefaults.from_dict(record.load_settings) if record is not None else ModelDefaults()
        chosen = replace(stored, mmproj=str(_key(projector)))
        if chosen.speculative == "draft":  # a projector does not go with a draft model: the download wins
            chosen = replace(chosen, speculative=None, draft_model=None)
        self.records.set_load_settings(name, chosen.as_dict())

    def record_local(self, path: Path) -> LibraryEntry:
        """A GGUF file the user loaded. One the library knows keeps its record (and source)."""
        key = _key(path)
        if self.records.by_path(str(key)) is None:
            if not key.is_file():
                raise LibraryError(f"no model file at {key}")
            self._record_new(key)
        return self._entry_at(key)

    def mark_used(self, path: Path) -> None:
        """The model at path was loaded now (recorded first if the library did not know it).
        A file that is not there is ignored: nothing was loaded from it."""
        key = _key(path)
        if not self.records.touch(str(key)) and key.is_file():
            self._record_new(key)
            self.records.touch(str(key))

    def set_defaults(self, name: str, defaults: ModelDefaults) -> LibraryEntry:
        defaults.validate()
        if defaults.mmproj and not Path(defaults.mmproj).expanduser().is_file():
            raise LibraryError(f"no vision projector file at {defaults.mmproj}")
        entry = self.entry(name)
        record = self.records.by_path(str(entry.path)) or self._record_new(entry.path, entry.name)
        self.records.set_load_settings(record.name, defaults.as_dict())
        return self._entry_at(entry.path)

    # ----- removing ---------------------------------------------------------------------------

    def remove(self, name: str, loaded: set[Path]) -> None:
        """Delete the model's files (all parts and the projector it came with; see
        files_to_delete) and forget it. Refused
        with ModelInUse while one of them is loaded; a file that cannot be deleted raises
        LibraryError and the record stays."""
        entry = self.listed(name)
        if entry is None:
            raise LibraryError(f"{name} is not in the library (not installed); see `chorus models list`")
        parts = {_key(p) for p in parts_of(entry.path)}
        if parts & {_key(p) for p in loaded}:
            raise ModelInUse(f"{name} is loaded; load another model before removing it")
        for part in self.files_to_delete(name):
            try:
                part.unlink(missing_ok=True)
            except OSError as exc:
                raise LibraryError(f"could not delete {part}: {exc.strerror or exc}") from None
        record = self.records.by_path(str(entry.path))
        if record is not None:
            self.records.delete(record.name)

    # ----- helpers ----------------------------------------------------------------------------

    def _entry(self, path: Path, record: ModelProfileRecord | None, name: str, source: str) -> LibraryEntry:
        return LibraryEntry(
            name=record.name if record is not None else name,
            path=path,
            size_bytes=size_on_disk(path),
            source=source,
            hub_repo=record.hub_repo if record is not None else None,
            last_used=record.last_used_at if record is not None else None,
            defaults=ModelDefaults.from_dict(record.load_settings) if record is not None else ModelDefaults(),
            installed=all_present(path),
        )

    def _entry_at(self, key: Path) -> LibraryEntry:
        return next(e for e in self.entries() if e.path == key)

    def _catalog_key(self, key: Path) -> str | None:
        return next((k for k, spec in self.catalog.items()
                     if _key(model_catalog.model_path(spec, self.models_dir)) == key), None)

    def _record_new(self, key: Path, name: str | None = None) -> ModelProfileRecord:
        catalog_key = self._catalog_key(key)
        if catalog_key is not None:
            return self.records.record(catalog_key, str(key), "catalog", size_bytes=size_on_disk(key))
        if name is None:
            name = key.name if not self._name_taken(key.name, key) else str(key)
        return self.records.record(name, str(key), "local", size_bytes=size_on_disk(key))

    def _name_taken(self, name: str, key: Path) -> bool:
        """name is another file's record, or a catalog key."""
        record = self.records.by_name(name)
        return name in self.catalog or (record is not None and record.path is not None and _key(record.path) != key)

    def _owned(self, path: Path) -> bool:
        return path.is_relative_to(self.models_dir)

    def _files_in_models_dir(self) -> Iterable[Path]:
        try:
            files = sorted(self.models_dir.glob("*.gguf"))
        except OSError:
            return []
        return [_key(f) for f in files if not is_later_part(f) and not is_projector(f.name)]
