"""All the window's controllers, built around one shared context: what the GUI's
composition root (ui/app_main.py), the smoke run, the GUI benchmark and the tests start."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from app.perf.monitor import PerfMonitor
from inference import BackendInfo, LoadSettings, SamplingParams
from storage import ChatRepository
from ui.controllers.ask_lines import AskLinesController
from ui.controllers.background import BackgroundController
from ui.controllers.chat_files import TransferController
from ui.controllers.compare import CompareController
from ui.controllers.conversations import ConversationsController
from ui.controllers.engine_status import EngineStatusController
from ui.controllers.jobs import JobsController
from ui.controllers.model_picker import ModelPickerController
from ui.controllers.models_window.window import ModelsWindowController
from ui.controllers.presets import PresetsController
from ui.controllers.prompts import PromptsController
from ui.controllers.sending import SendingController
from ui.controllers.server_switch import ServerController
from ui.controllers.settings import SettingsController
from ui.controllers.side_panel import SidePanelController
from ui.controllers.stop_all import StopAllController
from ui.controllers.theme import ThemeController
from ui.controllers.titles import TitlesController
from ui.controllers.tool_rounds import ToolRoundsController
from ui.controllers.welcome import WelcomeController
from ui.services.context import ControllerContext, build_context
from ui.services.window_state import WindowState
from ui.widgets.window.main_window import MainWindow


class Controllers:
    def __init__(self, window: MainWindow, repo: ChatRepository, settings: LoadSettings,
                 sampling: SamplingParams | None = None, models_dir: Path | None = None,
                 theme: str | None = None, auto_titles: bool = True, explicit: Collection[str] = (),
                 fetch_first: str | None = None) -> None:
        """fetch_first: the catalog key of the main model when it is not installed yet (first
        start): fetched on the welcome page, and the engine started once it is in place."""
        self.fetch_first = fetch_first
        ctx = self.ctx = build_context(window, repo, settings, sampling, models_dir, explicit)
        self.engines = ctx.engines
        self.streams = ctx.streams
        self.conversations = ConversationsController(ctx)
        self.sending = SendingController(ctx)
        self.tool_rounds = ToolRoundsController(ctx)
        self.ask_lines = AskLinesController(ctx)
        self.prompts = PromptsController(ctx)
        self.presets = PresetsController(ctx)
        self.settings = SettingsController(ctx)
        self.side_panel = SidePanelController(ctx)
        self.server = ServerController(ctx)
        self.compare = CompareController(ctx)
        self.background = BackgroundController(ctx)
        self.window_state = WindowState(ctx, marks=self.background)  # keeps its unread marks
        self.engine_status = EngineStatusController(ctx)
        self.theme = ThemeController(ctx, override=theme)  # theme: --theme, which wins over the saved one
        self.stop_all = StopAllController(ctx)
        self.transfer = TransferController(ctx)
        self.titles = TitlesController(ctx, enabled=auto_titles)
        self.model_picker = ModelPickerController(ctx)
        self.models = ModelsWindowController(ctx)  # the Hub and the library, made on first use
        self.welcome = WelcomeController(ctx)
        self.jobs = JobsController(ctx)  # Chat → Jobs…: background jobs on the main engine
        self.monitor = PerfMonitor(
            ctx.engines.engines_metrics,
            lambda m, hw: ctx.gui.post(lambda: window.perf_panel.add_sample(m, hw)),
        )

    @property
    def context(self) -> ControllerContext:
        return self.ctx

    def start(self) -> None:
        """On the running event loop: the window's contents, then the engine."""
        self.ctx.streams.start()
        self.background.start()
        self.monitor.start()
        self.conversations.refresh()
        self.presets.refresh()
        self.prompts.start()
        self.settings.restore()
        self.ctx.tools.restore()
        self.model_picker.refresh()
        self.window_state.restore()
        self.theme.restore()
        if self.fetch_first is not None:
            self.model_picker.fetch(self.fetch_first, first_start=True)  # it starts the engine once fetched
        else:
            self.engines.start()

    def backend_info(self) -> BackendInfo | None:
        """The llama.cpp build the engines run (the About dialog's; this process loads none)."""
        return self.engines.backend_info()

    def shutdown(self) -> None:
        self.model_picker.shutdown()
        self.server.shutdown()
        self.models.shutdown()
        self.window_state.save()
        self.ctx.streams.stop()
        self.background.stop()
        self.monitor.stop()
        self.compare.shutdown()
        self.jobs.shutdown()  # pauses the jobs running, while the engine can still take their cancels
        self.engines.shutdown()
        self.ctx.tools.shutdown()
        self.ctx.storage.shutdown()
