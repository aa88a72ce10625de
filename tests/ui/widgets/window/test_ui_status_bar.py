"""The window's status bar: the offer to undo a deletion goes after a while, and a window
closed before it goes takes the pending hide with it."""

from __future__ import annotations

from shiboken6 import isValid

from ui.widgets.window import status_bar
from ui.widgets.window.status_bar import WindowStatusBar


def test_the_undo_offer_hides_itself_and_a_closed_bar_drops_the_pending_hide(qtbot, monkeypatch):
    """It hid a deleted label 10 s after its window closed: an error caught in whatever test
    ran next (a clean-clone run, test_stop_stops_only_its_tab's set-up)."""
    monkeypatch.setattr(status_bar, "UNDO_MS", 50)
    bar = WindowStatusBar()
    qtbot.addWidget(bar)
    bar.show()
    bar.offer_undo_delete(7, "Pancakes")
    assert bar.undo_label.isVisible() and bar.undo_label.text() == "Deleted “Pancakes”"
    qtbot.waitUntil(lambda: not bar.undo_label.isVisible())

    closing = WindowStatusBar()
    closing.offer_undo_delete(8, "Waffles")
    closing.deleteLater()
    qtbot.waitUntil(lambda: not isValid(closing))
    qtbot.wait(150)  # past UNDO_MS: pytest-qt fails the test on an error raised in Qt's loop

