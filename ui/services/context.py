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
from app.conversations import ConversationSession, OpenConversations
from app.documents import DocumentPins
from app.engines.hub import EngineHub
from app.jobs import JobSlots, default_window
from app.models.library import ModelLibrary
from inference import LoadSettings, SamplingParams
from storage import CatalogRepository, ChatRepository
from ui.services.engine_signals import EngineSignals, engine_hub
from ui.services.mcp_tools import AppTools
from ui.services.stream_presenter import StreamPresenter
from ui.services.threads import GuiCalls, StorageThread
from ui.services.thumbnails import ImageThumbnails
from ui.widgets.window.main_window import MainWindow


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
    # A session per conversation (app/conversations/): its rows' use-cases and what is kept
    # about it beyond them (its last prompt, what its tool round waits on, its calls' texts).
    conversations: OpenConversations
    # Sent images' thumbnails (by sha256), shared by the chat tabs and the compare panes.
    thumbnails: ImageThumbnails
    # The items in flight the window's jobs and its server's batches share on the main
    # engine: its sequences but one, whatever the number of jobs (the chat's KV keeps one).
    job_slots: JobSlots
    library: ModelLibrary | None = None  # the model library (its calls read the database: storage thread)
    pins: DocumentPins = field(default_factory=DocumentPins)  # documents' prefixes kept while chats are open

    def session(self, conversation_id: int) -> ConversationSession:
        """The conversation's session (made on first use): its use-cases and what is kept
        about it while it is open."""
        return self.conversations.session(conversation_id)

    def waiting_on_tools(self) -> dict[int, str]:
        """The chats between a reply's turns, and what each waits on."""
        return self.conversations.waiting()


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
    engines, engine_signals = engine_hub(settings, catalog, storage, gui, library, explicit)
    return ControllerContext(
        window=window, repo=repo, catalog=catalog, storage=storage, gui=gui, engines=engines,
        engine_signals=engine_signals, streams=streams, events=ControllerEvents(),
        sampling=sampling or ChatDefaults().sampling(), chat_defaults=ChatDefaults(), models_dir=models_dir,
        tools=AppTools(catalog, storage, gui), library=library,
        conversations=OpenConversations(repo, engines.model_label),
        thumbnails=ImageThumbnails(repo, storage, gui),
        job_slots=JobSlots(lambda: default_window(engines.main)),
    )
