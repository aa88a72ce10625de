"""The window's shortcuts pressed as a user does (keys on the focused widget), on the
platform the suite runs on; test_ui_shortcuts_x11.py runs this module again through Qt's xcb
plugin on Xvfb, whose key bindings differ from offscreen's (issue 27, defects 2 and 3)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication

CTRL = Qt.KeyboardModifier.ControlModifier
CTRL_SHIFT = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier


def _press(qtbot, window, key: Qt.Key, modifiers=CTRL) -> None:
    """A key on the widget that has the focus, the window active, as typed."""
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    qtbot.keyClick(QApplication.focusWidget() or window, key, modifiers)


def test_ctrl_w_closes_a_tab_at_every_press(window, qtbot):
    for i in (1, 2, 3):
        window.open_tab(i, f"chat {i}")
    _press(qtbot, window, Qt.Key.Key_W)
    qtbot.waitUntil(lambda: window.tabs.count() == 2)
    _press(qtbot, window, Qt.Key.Key_W)
    qtbot.waitUntil(lambda: window.tabs.count() == 1)
    assert window.tab_for(1) is not None


def test_no_action_has_a_key_twice_and_the_list_shows_each_once(window):
    for action in window.findChildren(QAction):
        keys = [k.toString() for k in action.shortcuts()]
        assert len(keys) == len(set(keys)), f"{action.text()}: {keys}"
    close = next(row for row in window.show_shortcuts().rows() if row[1] == "Close tab")
    assert close[2].split(", ").count("Ctrl+W") == 1, close


def _toggles_details(qtbot, window, tab) -> None:
    """Ctrl+Shift+D opens the tab's Details and closes them again."""
    before = tab.panel_button.isChecked()
    _press(qtbot, window, Qt.Key.Key_D, CTRL_SHIFT)
    qtbot.waitUntil(lambda: tab.panel_button.isChecked() is not before)
    _press(qtbot, window, Qt.Key.Key_D, CTRL_SHIFT)
    qtbot.waitUntil(lambda: tab.panel_button.isChecked() is before)


def test_ctrl_shift_d_toggles_details_after_a_tab_was_closed_and_reopened(window, qtbot):
    window.open_tab(1, "first")
    window.open_tab(2, "second")
    _press(qtbot, window, Qt.Key.Key_W)
    qtbot.waitUntil(lambda: window.tabs.count() == 1)
    _toggles_details(qtbot, window, window.tab_for(1))
    _toggles_details(qtbot, window, window.open_tab(2, "second"))


def test_ctrl_shift_d_toggles_details_after_a_comparison_opened(window, qtbot):
    tab = window.open_tab(1, "a chat")
    compare, _made = window.open_compare(5, "a comparison")
    compare.add_pane(11, "")
    compare.add_pane(12, "")
    window.tabs.setCurrentWidget(tab)
    _toggles_details(qtbot, window, tab)


def test_the_shortcuts_list_names_ctrl_shift_d(window):
    window.open_tab(1, "a chat")
    assert ("Chat", "Details", "Ctrl+Shift+D") in window.show_shortcuts().rows()
