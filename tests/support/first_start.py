"""`chorus app` on a data folder with no model, in a process of its own (run as
`python -m tests.support.first_start DATA_DIR`): it watches the window from inside and
prints what it saw as one JSON line, then quits. A process of its own because the app's
quit ends the QApplication's event loop for good: later tests in the same process would
never see a timer fire again."""

from __future__ import annotations

import json
import sys
import time

POLL_MS = 50
GUARD_MS = 120_000  # a window that never came must not hang the run


def watch_first_start(data_dir: str) -> dict[str, object]:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.cli.main import main
    from ui.widgets.window.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    seen: dict[str, object] = {}
    started = time.monotonic()

    def watch() -> None:
        shown = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
        if not shown:
            return
        welcome = shown[0].welcome
        seen.setdefault("window_after_s", time.monotonic() - started)
        if welcome.cancel_button.isVisible():  # while the download runs
            seen.setdefault("running", [welcome.model_state.text(), welcome.progress.isVisible()])
        if welcome.retry_button.isVisible():  # it gave up: said on the page, with Retry
            seen["failed"] = welcome.model_state.text()
            app.quit()

    poll = QTimer(interval=POLL_MS)
    poll.timeout.connect(watch)
    poll.start()
    QTimer.singleShot(GUARD_MS, app.quit)
    seen["status"] = main(["--data-dir", data_dir, "app", "--theme", "light"])
    return seen


if __name__ == "__main__":
    print(json.dumps(watch_first_start(sys.argv[1])))
