"""The window and its controllers on a data folder, with no engine started, for the Models
window's tests: the Hub at HF_ENDPOINT (the stand-in, tests/support/hub_standin.py, or a closed
port), the library in the data folder's database, the models in its models/ folder."""

from __future__ import annotations

import asyncio
from pathlib import Path

from inference import LoadSettings

WAIT_MS = 30_000


class ModelsShell:
    def __init__(self, qtbot, data_dir: Path, model_path: Path | None = None) -> None:
        """model_path: the main engine's model (never started here): a file the library may
        hold, so that deleting it is refused."""
        assert asyncio.get_event_loop().is_running(), "needs the qt_asyncio fixture"
        from app.chats.store import open_chat_store
        from ui.controllers.root import Controllers
        from ui.widgets.main_window import MainWindow

        self.qtbot = qtbot
        self.data_dir = data_dir
        self.db, self.repo = open_chat_store(data_dir)
        self.window = MainWindow()
        qtbot.addWidget(self.window)
        settings = LoadSettings(model_path=model_path or data_dir / "no-model.gguf", n_ctx=2048)
        self.controllers = Controllers(self.window, self.repo, settings, auto_titles=False)
        self.ctx = self.controllers.context
        self.models = self.controllers.models
        self.window.show()
        qtbot.waitExposed(self.window)

    @property
    def models_dir(self) -> Path:
        return self.ctx.models_dir

    def open(self):
        """File → Models…, as a user opens it; the window once it is on screen."""
        self.window.models_requested.emit()
        win = self.models.window
        self.qtbot.waitExposed(win)
        return win

    def settled(self) -> None:
        """Until the storage thread has done everything asked of it so far."""
        done = []
        self.ctx.storage.run(lambda: None, lambda _none: done.append(True))
        self.qtbot.waitUntil(lambda: bool(done), timeout=10_000)

    def library_names(self) -> list[str]:
        return self.models.window.library.names()

    def close(self) -> None:
        if self.models.window is not None:
            self.models.window.close()
        self.models.shutdown()
        self.controllers.engines.shutdown()  # one a test loaded through Load
        self.ctx.storage.shutdown()
        self.db.close()
