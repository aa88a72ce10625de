"""The side panel's words said once (issue 39, defect 13), with no model: a chat opened as the
sidebar opens one, its Details opened with the keys."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel, QPlainTextEdit


def _said(panel, words: str) -> int:
    """How many of the panel's visible labels and empty editors' placeholders say `words`."""
    labels = [w.text() for w in panel.findChildren(QLabel) if w.isVisible()]
    holders = [e.placeholderText() for e in panel.findChildren(QPlainTextEdit) if e.isVisible() and not e.toPlainText()]
    return sum(words in text for text in labels + holders)


def test_no_system_prompt_is_said_once(desk, qtbot):
    tab = desk.open_chat("plain")
    desk.window.activateWindow()
    qtbot.waitUntil(desk.window.isActiveWindow)
    tab.composer.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is tab.composer)
    qtbot.keyClick(tab.composer, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(tab.panel.isVisible)
    desk.settled()  # the panel's values are in: shown by then, in the storage thread's order
    assert _said(tab.panel, "No system prompt") == 1
