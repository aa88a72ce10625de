"""`chorus app`: the desktop window on the default (or chosen) model."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from app.chats.store import open_chat_store
from app.cli.engine_args import explicit_settings, settings_from_args
from app.paths import kv_cache_dir
from storage import StorageError

# A smoke run answers briefly and greedily: it checks the pipeline, not the model.
SMOKE_MAX_TOKENS = 32
SMOKE_TIMEOUT_S = 300.0


def run_app(args: argparse.Namespace, model: Path, data_dir: Path, fetch_first: str | None = None) -> int:
    """fetch_first: the catalog key of model when it is not installed yet: the window opens
    and fetches it (progress, cancel, retry on its welcome page), then starts the engine."""
    smoke_prompt = getattr(args, "smoke_prompt", None)
    if smoke_prompt:  # a smoke run is headless unless told otherwise
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from ui.qt_platform import display_problem

    problem = display_problem()
    if problem:  # said plainly, instead of Qt aborting the process (exit status 134)
        print(problem, file=sys.stderr)
        return 1
    import qasync
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.about import gather_about
    from app.perf.heap import freeze_startup_heap
    from inference import SamplingParams
    from ui.controllers.root import Controllers
    from ui.icon import app_icon
    from ui.services.gui_thread_gc import GuiThreadCollector
    from ui.theme import apply_theme
    from ui.widgets.window.about_dialog import AboutDialog
    from ui.widgets.window.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    collector = GuiThreadCollector(app)  # Qt's objects freed on their thread (a collection elsewhere deadlocked)
    app.setApplicationName("Chorus")
    app.setDesktopFileName("chorus")  # matches packaging/linux/chorus.desktop (Wayland app id)
    app.setWindowIcon(app_icon())
    apply_theme(app, args.theme or "system")  # the saved theme comes with the controllers
    # The loop first: controllers and widgets schedule storage calls as they are built, and
    # a task made before it would land on a default loop that never runs (and be destroyed,
    # pending, when that loop is collected).
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    try:
        db, repo = open_chat_store(data_dir)
    except StorageError as exc:  # a damaged (or too new) database: said in a box, not a traceback
        return show_startup_error(str(exc))
    window = MainWindow()
    # open(), not exec(): no nested event loop under qasync's
    window.about_requested.connect(lambda: AboutDialog(gather_about(data_dir, controllers.backend_info()),
                                                       window).open())
    sampling = SamplingParams.greedy(max_tokens=SMOKE_MAX_TOKENS) if smoke_prompt else None
    settings = settings_from_args(args, model, kv_cache_dir=kv_cache_dir(data_dir))
    controllers = Controllers(window, repo, settings, sampling=sampling, theme=args.theme,
                              explicit=set(explicit_settings(args)),  # they win over the model's library defaults
                              fetch_first=fetch_first)
    window.show()
    loop.call_soon(controllers.start)  # the controller's work runs as tasks on this loop
    loop.call_soon(freeze_startup_heap)  # full GC passes stalled the window for up to 159 ms
    if args.quit_after:  # smoke tests: start, run a while, quit cleanly
        QTimer.singleShot(int(args.quit_after * 1000), app.quit)
    status = 0
    with loop:
        if smoke_prompt:
            status = loop.run_until_complete(_smoke(controllers, window, repo, smoke_prompt,
                                                    getattr(args, "smoke_attach", [])))
        else:
            closing = asyncio.Event()
            app.aboutToQuit.connect(closing.set)
            loop.run_until_complete(closing.wait())
    controllers.shutdown()
    db.close()
    collector.stop()
    return status


def startup_error_box(message: str):
    """What stops the start (the chat database's problem: what, where, how to restore a
    backup; a data folder that cannot be made) in a non-modal box: shown with show(), never
    exec(), so no event loop runs nested in another."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QMessageBox

    box = QMessageBox(QMessageBox.Icon.Critical, "Chorus cannot start", message)
    box.setWindowModality(Qt.WindowModality.NonModal)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)  # the path, to copy
    return box


def show_startup_error(message: str) -> int:
    """Before the window exists: the line on stderr and the box alone, until it is closed;
    exit status 2. Without a display, the line alone."""
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    from ui.qt_platform import display_problem

    print(f"chorus: {message}", file=sys.stderr)
    if QApplication.instance() is None:
        if display_problem():
            return 2
        QApplication(sys.argv[:1])
    box = startup_error_box(message)
    # The one event loop running (none runs yet: not nested), ended by the box alone; not
    # app.quit(), which would close every window and end the application's loop too.
    loop = QEventLoop()
    box.finished.connect(loop.quit)
    box.show()
    loop.exec()
    return 2


async def _smoke(controllers, window, repo, prompt: str, attach: list[Path]) -> int:
    from ui.smoke import SmokeFailure, run_smoke

    try:
        result = await run_smoke(controllers, window, repo, prompt, SMOKE_TIMEOUT_S, attach)
    except SmokeFailure as exc:
        print(f"chorus: smoke test failed: {exc}", file=sys.stderr)
        return 1
    print(result.reply)
    print(f"chorus: smoke test passed in {result.seconds:.1f} s: model {result.model}, "
          f"conversation {result.conversation_id} saved", file=sys.stderr)
    # What the About dialog would show: proves the bundle carries its metadata and libraries.
    from PySide6.QtCore import qVersion
    from PySide6.QtGui import QGuiApplication

    from app.about import gather_about

    about = dict(gather_about(repo.db.path.parent, controllers.backend_info()).rows(qt_version=qVersion()))
    print(f"chorus: Chorus {about['Chorus']}; llama.cpp {about['llama.cpp']}; Qt {about['Qt']}; "
          f"platform: {QGuiApplication.platformName()}", file=sys.stderr)
    return 0
