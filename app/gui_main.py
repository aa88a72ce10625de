"""`chorus app`: the desktop window on the default (or chosen) model."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from app.engine_settings import settings_from_args
from app.store import open_store


def run_app(args: argparse.Namespace, model: Path, data_dir: Path) -> int:
    import qasync
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.chat_controller import ChatController
    from ui.main_window import MainWindow
    from ui.theme import apply_theme

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Chorus")
    apply_theme(app, args.theme)
    db, repo = open_store(data_dir)
    window = MainWindow()
    controller = ChatController(window, repo, settings_from_args(args, model))
    window.show()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    loop.call_soon(controller.start)  # the controller's work runs as tasks on this loop
    if args.quit_after:  # smoke tests: start, run a while, quit cleanly
        QTimer.singleShot(int(args.quit_after * 1000), app.quit)
    closing = asyncio.Event()
    app.aboutToQuit.connect(closing.set)
    with loop:
        loop.run_until_complete(closing.wait())
    controller.shutdown()
    db.close()
    return 0
