"""The Library tab's reads and writes, on the storage thread like every database call: the
entries (with which are loaded), delete (refused while loaded), per-model defaults. Load
goes out through the main window's model_requested, the model picker's path."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from ui.services.context import ControllerContext
from ui.services.worker_hops import WorkerHops, first_line, storage_message
from ui.widgets.models.library_view import LibraryView

if TYPE_CHECKING:
    from app.models.library import LibraryEntry, ModelLibrary

T = TypeVar("T")


class LibraryController:
    def __init__(self, ctx: ControllerContext, view: LibraryView, hops: WorkerHops,
                 library: Callable[[], ModelLibrary]) -> None:
        self.ctx = ctx
        self.view = view
        self.hops = hops
        self.library = library
        view.load_requested.connect(self.load)
        view.delete_requested.connect(self.delete)
        view.defaults_saved.connect(self.save_defaults)

    def _stored(self, work: Callable[[], T], then: Callable[[T], Any]) -> Future:
        return self.hops.run(self.ctx.storage.executor, work, then,
                             lambda message: self.view.set_message(message, error=True), storage_message)

    def refresh(self) -> Future:
        loaded = self.ctx.engines.loaded_paths()

        def read() -> tuple[list[LibraryEntry], set[str]]:  # resolved as the library spells its paths
            return self.library().entries(), {str(p.resolve()) for p in loaded}

        return self._stored(read, lambda found: self.view.set_entries(*found))

    def delete(self, name: str) -> Future:
        from app.models.library import ModelInUse

        loaded = self.ctx.engines.loaded_paths()

        def work() -> str:
            try:
                self.library().remove(name, loaded)
            except ModelInUse as exc:
                return first_line(exc)
            return ""

        def then(refused: str) -> None:
            self.view.set_message(refused or f"Deleted {name}.", error=bool(refused))
            if not refused:
                self.refresh()
                self.ctx.events.models_changed.emit()  # the model picker's list

        return self._stored(work, then)

    def save_defaults(self, name: str, values: dict) -> Future:
        from app.models.library import ModelDefaults

        def then(_entry: LibraryEntry) -> None:
            self.view.set_message(f"Saved the defaults for {name}: they apply when it loads next.")
            self.refresh()

        return self._stored(lambda: self.library().set_defaults(name, ModelDefaults(**values)), then)

    def load(self, path: str) -> None:
        if path:
            self.ctx.window.model_requested.emit(path)
