"""The main window with its controllers, as the composition root builds them, on the chat
store of a data folder; no engine is started (tests/support/gui_app.py's App starts one)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from inference import LoadSettings


class Window:
    def __init__(self, qtbot, data_dir: Path, settings: LoadSettings, **options) -> None:
        """options: Controllers' own (sampling, theme, auto_titles, ...)."""
        assert asyncio.get_event_loop().is_running(), "needs the qt_asyncio fixture"
        from app.chats.store import open_chat_store
        from ui.controllers.root import Controllers
        from ui.widgets.window.main_window import MainWindow

        self.qtbot = qtbot
        self.db, self.repo = open_chat_store(data_dir)
        self.window = MainWindow()
        qtbot.addWidget(self.window)
        self.controllers = Controllers(self.window, self.repo, settings, **options)
        self.ctx = self.controllers.context

    def settled(self) -> None:
        """Until the storage thread has done everything asked of it so far."""
        done = []
        self.ctx.storage.run(lambda: None, lambda _none: done.append(True))
        self.qtbot.waitUntil(lambda: bool(done), timeout=10_000)

    def close(self) -> None:
        self.controllers.window_state.stop()  # a composer's pending save would find no storage thread
        self.ctx.storage.shutdown()
        self.db.close()


def menu_action(window, text: str):
    """The window's menu action with this text (a QAction; its menus are built by menus.py)."""
    from PySide6.QtGui import QAction

    return next(a for a in window.findChildren(QAction) if a.text() == text)
