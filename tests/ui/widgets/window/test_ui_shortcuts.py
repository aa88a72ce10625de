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


def test_ctrl_w_leaves_the_focus_in_the_composer_of_the_tab_now_in_front(window, qtbot):
    """Issue 39, defect 8: after Ctrl+W the focus went to the sidebar's search box, and the
    next keys filtered the sidebar instead of writing to the chat now in front."""
    for i in (1, 2, 3):
        window.open_tab(i, f"chat {i}")
    _press(qtbot, window, Qt.Key.Key_W)
    qtbot.waitUntil(lambda: window.tabs.count() == 2)
    front = window.tabs.currentWidget()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is front.composer)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_A)
    assert front.composer.toPlainText() == "a"
    assert window.search_box.text() == ""


def test_no_action_has_a_key_twice_and_the_list_shows_each_once(window):
    for action in window.findChildren(QAction):
        keys = [k.toString() for k in action.shortcuts()]
        assert len(keys) == len(set(keys)), f"{action.text()}: {keys}"
    close = next(row for row in window.menus.show_shortcuts().rows() if row[1] == "Close tab")
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
    assert ("Chat", "Details", "Ctrl+Shift+D") in window.menus.show_shortcuts().rows()


def test_the_shortcuts_list_has_the_composers_enter_and_shift_enter(window):
    """Issue 39, defect 11: Help → Keyboard shortcuts lacked Enter and Shift+Enter."""
    rows = {(row[1], row[2]) for row in window.menus.show_shortcuts().rows()}
    assert {("Send", "Enter"), ("New line", "Shift+Enter")} <= rows


def test_esc_cancels_editing_a_reply_in_place(window, qtbot):
    """Issue 39, defect 11: Esc did nothing while a reply (or a message) was being edited:
    only the banner's Cancel button gave the draft back."""
    tab = window.open_tab(1, "a chat")
    tab.composer.setPlainText("my draft")
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)  # only an active window has a focus widget
    for role in ("assistant", "user"):
        tab.start_editing(7, "the reply as it was", role)
        qtbot.waitUntil(lambda: QApplication.focusWidget() is tab.composer)
        _press(qtbot, window, Qt.Key.Key_Escape, Qt.KeyboardModifier.NoModifier)
        qtbot.waitUntil(lambda: tab.editing is None)
        assert tab.edit_banner.isHidden()
        assert tab.composer.toPlainText() == "my draft"


def test_ctrl_page_down_and_up_step_through_the_tabs(window, qtbot):
    """Issue 39, defect 11: Ctrl+PgDown / Ctrl+PgUp did nothing."""
    for i in (1, 2, 3):
        window.open_tab(i, f"chat {i}")
    window.tabs.setCurrentIndex(0)
    window.tabs.widget(0).composer.setFocus()
    _press(qtbot, window, Qt.Key.Key_PageDown)
    qtbot.waitUntil(lambda: window.tabs.currentIndex() == 1)
    _press(qtbot, window, Qt.Key.Key_PageDown)
    qtbot.waitUntil(lambda: window.tabs.currentIndex() == 2)
    _press(qtbot, window, Qt.Key.Key_PageUp)
    qtbot.waitUntil(lambda: window.tabs.currentIndex() == 1)
    rows = {(row[1], row[2]) for row in window.menus.show_shortcuts().rows()}
    assert ("Next tab", "Ctrl+Tab, Ctrl+PgDown") in rows, rows
    assert ("Previous tab", "Ctrl+Shift+Tab, Ctrl+PgUp") in rows, rows
    close = next(row for row in window.menus.show_shortcuts().rows() if row[1] == "Close tab")
    assert close[2].startswith("Ctrl+W") and "Close" not in close[2].split(", "), close  # no media key
