"""The engine hub's events as Qt signals: the thin adapter between app/engines/hub.py (no
Qt) and the controllers and widgets that listen.

The hub reports each event on the GUI thread already (it runs its callbacks through
GuiCalls.post, the queued hop every engine thread takes), so a slot connected here may
touch widgets.
"""

from __future__ import annotations

from collections.abc import Collection

from PySide6.QtCore import QObject, Signal

from app.engines.hub import EngineEvents, EngineHub
from app.models.library import ModelLibrary
from inference import LoadSettings
from storage import CatalogRepository
from ui.services.threads import GuiCalls, StorageThread


class EngineSignals(QObject):
    state_changed = Signal(object)  # EngineState of the main engine
    pool_state_changed = Signal(object, object)  # ModelSource, EngineState of a pool engine
    load_progress = Signal(object)  # fraction loaded, or None when done
    switching = Signal(str)  # what is being loaded or connected
    model_error = Signal(str)  # a model or server that could not be used, and why
    recent_models_changed = Signal(list)

    def events(self) -> EngineEvents:
        """The hub's callbacks: each emits its signal."""
        return EngineEvents(
            state_changed=self.state_changed.emit,
            pool_state_changed=self.pool_state_changed.emit,
            load_progress=self.load_progress.emit,
            switching=self.switching.emit,
            model_error=self.model_error.emit,
            recent_models_changed=self.recent_models_changed.emit,
        )


def engine_hub(settings: LoadSettings, catalog: CatalogRepository, storage: StorageThread, gui: GuiCalls,
               library: ModelLibrary | None = None,
               explicit: Collection[str] = ()) -> tuple[EngineHub, EngineSignals]:
    """The window's engine hub: its storage calls on the storage thread, its callbacks on
    the GUI thread, its events as the signals returned with it."""
    signals = EngineSignals()
    hub = EngineHub(settings, catalog, stored=storage.run, post=gui.post, events=signals.events(),
                    library=library, explicit=explicit)
    return hub, signals
