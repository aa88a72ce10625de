"""The desktop app on a damaged chat database, or a data folder it cannot use: a box says so
(what, where, how to restore a backup or where to go instead), not a traceback, and the file
is left as it is."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from ui.app_main import run_app


def app_args() -> argparse.Namespace:
    return argparse.Namespace(smoke_prompt=None, theme="light", quit_after=None)


@contextlib.contextmanager
def boxes_closed(qapp) -> Iterator[list[QMessageBox]]:
    """The boxes the app shows, closed as a person would (finished quits the box's loop)."""
    seen: list[QMessageBox] = []

    def close_the_box() -> None:
        boxes = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]
        seen.extend(boxes)
        for box in boxes:
            box.close()

    QTimer.singleShot(300, close_the_box)
    guard = QTimer(singleShot=True, interval=60_000)  # a box that never came must not hang the run
    guard.timeout.connect(qapp.quit)
    guard.start()
    try:
        yield seen
    finally:
        guard.stop()  # or it would quit a later test's loop


def test_the_app_shows_a_damaged_database_in_a_non_modal_box(qapp, tmp_path, capsys):
    path = tmp_path / "chorus.db"
    content = os.urandom(64 * 1024)
    path.write_bytes(content)
    with boxes_closed(qapp) as seen:
        status = run_app(app_args(), Path("no-model.gguf"), tmp_path)  # the model is never reached

    assert status == 2
    assert len(seen) == 1
    box = seen[0]
    assert box.icon() == QMessageBox.Icon.Critical
    assert not box.isModal() and box.windowModality() == Qt.WindowModality.NonModal
    assert box.text().startswith("the chat database is damaged: ") and str(path) in box.text()
    assert "chorus backup" in box.text()
    assert "the chat database is damaged" in capsys.readouterr().err
    assert path.read_bytes() == content


def test_the_app_shows_a_data_folder_it_cannot_make_in_the_same_box(qapp, tmp_path, capsys):
    """Issue 39: `chorus app` on a data folder that cannot be made was a traceback on a
    terminal nobody looks at when the app is started from its icon."""
    from app.cli.main import main
    from tests.support.filesystems import read_only_folder

    with read_only_folder(tmp_path / "ro") as ro, boxes_closed(qapp) as seen:
        status = main(["--data-dir", str(ro / "chorus"), "app", "--theme", "light"])
    assert status == 2
    [box] = seen
    assert box.icon() == QMessageBox.Icon.Critical and box.windowModality() == Qt.WindowModality.NonModal
    assert box.text().startswith(f"the data folder {ro / 'chorus'} cannot be created: ")
    assert capsys.readouterr().err.splitlines() == [f"chorus: {box.text()}"]
