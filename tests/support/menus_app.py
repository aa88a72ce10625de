"""The window and its controllers on a data folder, without an engine: enough for the menus'
tests (theme, export and import, shortcuts), which need storage but no model."""

from __future__ import annotations

import asyncio
from pathlib import Path

from inference import LoadSettings


class Shell:
    def __init__(self, qtbot, data_dir: Path, theme: str | None = None) -> None:
        assert asyncio.get_event_loop().is_running(), "needs the qt_asyncio fixture"
        from app.chats.store import open_chat_store
        from ui.controllers.root import Controllers
        from ui.widgets.main_window import MainWindow

        self.qtbot = qtbot
        self.db, self.repo = open_chat_store(data_dir)
        self.window = MainWindow()
        qtbot.addWidget(self.window)
        settings = LoadSettings(model_path=data_dir / "no-model.gguf")
        self.controllers = Controllers(self.window, self.repo, settings, theme=theme, auto_titles=False)
        self.ctx = self.controllers.context
        self.window.show()
        qtbot.waitExposed(self.window)
        # What Controllers.start() does, less the engine
        self.controllers.conversations.refresh()
        self.controllers.theme.restore()

    def settled(self) -> None:
        """Until the storage thread has done everything asked of it so far."""
        done = []
        self.ctx.storage.run(lambda: None, lambda _none: done.append(True))
        self.qtbot.waitUntil(lambda: bool(done), timeout=10_000)

    def close(self) -> None:
        self.ctx.storage.shutdown()
        self.db.close()
