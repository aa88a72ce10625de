"""What the controllers share, built once by the GUI's composition root.

Controllers never import each other: each gets this context and talks to the others only
through the window's signals, the services here (storage thread, engines and their signals,
streams) and the events below.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.chats.defaults import ChatDefaults
from app.documents import DocumentPins, DocumentPrompt
from app.engines.hub import EngineHub
from app.models.library import ModelLibrary
from inference import LoadSettings, SamplingParams
from storage import CatalogRepository, ChatRepository
from ui.services.engine_signals import EngineSignals, engine_hub
from ui.services.mcp_tools import AppTools
from ui.services.stream_presenter import StreamPresenter
from ui.services.threads import GuiCalls, StorageThread
from ui.widgets.main_window import MainWindow


class ControllerEvents(QObject):
    """Things one controller does that others react to."""

    conversations_changed = Signal()  # a title, pin, order or membership changed: redraw the sidebar
    tab_opened = Signal(object)  # a ChatTab that needs its signals wired
    models_changed = Signal()  # a model was downloaded or deleted: lists of model files are stale


@dataclass(eq=False)
class ControllerContext:
    window: MainWindow
    repo: ChatRepository
    catalog: CatalogRepository
    storage: StorageThread
    gui: GuiCalls
    engines: EngineHub  # Qt-free: the engines' lifecycle, settings, switching, routing
    engine_signals: EngineSignals  # what engines does, as signals on the GUI thread
    streams: StreamPresenter
    events: ControllerEvents
    sampling: SamplingParams  # the app's defaults; a chat's own settings go on top
    chat_defaults: ChatDefaults  # Settings: what `sampling` came from, and the overflow policy
    models_dir: Path
    tools: AppTools  # the MCP servers (Settings -> Tools) and the tools each chat has on
    library: ModelLibrary | None = None  # the model library (its calls read the database: storage thread)
    pins: DocumentPins = field(default_factory=DocumentPins)  # documents' prefixes kept while chats are open
    # Each chat's last prompt with documents (the side panel's document tokens), by conversation id.
    documents_used: dict[int, DocumentPrompt] = field(default_factory=dict)
    # Chats between a reply's turns, by conversation id: what they wait on ("running add").
    tool_waits: dict[int, str] = field(default_factory=dict)
    # Replies that called tools, by message id: the calls as the model wrote them (storage keeps
    # the calls, not that text), so the next turn's prompt shows them token for token and
    # finds them in the KV. This run of the app only.
    call_texts: dict[int, str] = field(default_factory=dict)


def build_context(window: MainWindow, repo: ChatRepository, settings: LoadSettings,
                  sampling: SamplingParams | None = None, models_dir: Path | None = None,
                  explicit: Collection[str] = ()) -> ControllerContext:
    """explicit: the LoadSettings fields the command line set (they win over a model's defaults)."""
    catalog = CatalogRepository(repo.db)
    models_dir = models_dir or Path(repo.db.path).parent / "models"
    library = ModelLibrary(repo.db, models_dir)
    storage = StorageThread(lambda exc: window.statusBar().showMessage(f"Storage error: {exc}", 8000))
    gui = GuiCalls()
    streams = StreamPresenter(window, storage.executor)
    engines, engine_signals = engine_hub(settings, catalog, storage, gui, streams.on_delta, library, explicit)
    return ControllerContext(
        window=window, repo=repo, catalog=catalog, storage=storage, gui=gui, engines=engines,
        engine_signals=engine_signals, streams=streams, events=ControllerEvents(),
        sampling=sampling or ChatDefaults().sampling(), chat_defaults=ChatDefaults(), models_dir=models_dir,
        tools=AppTools(catalog, storage, gui), library=library,
    )
