"""The window's chrome (issue 27's "current look"): the sidebar hidden and shown with Ctrl+B
and its ☰ button, the tab bar readable with twelve tabs in a 900-px window, and the model
loader, a wide box at the top centre naming the model and its state. Keys are pressed on
the focused widget; no controllers, no engine."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionTab

from ui.widgets.models.model_picker import LOADER_MIN_W, LOADING, READY, ModelStatus
from ui.widgets.window.chat_tabs import MIN_TAB_W

CTRL = Qt.KeyboardModifier.ControlModifier
READABLE_CHARS = 10  # of a title, however many tabs are open


def _press(qtbot, window, key: Qt.Key, modifiers=CTRL) -> None:
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    qtbot.keyClick(QApplication.focusWidget() or window, key, modifiers)


def test_ctrl_b_and_the_button_hide_and_show_the_sidebar(window, qtbot):
    tab = window.open_tab(1, "A chat")
    assert window.sidebar.isVisible()
    width = tab.width()
    _press(qtbot, window, Qt.Key.Key_B)
    qtbot.waitUntil(lambda: not window.sidebar.isVisible())
    assert not window.menus.sidebar_action.isChecked()
    qtbot.waitUntil(lambda: tab.width() > width)  # the chat takes the room
    _press(qtbot, window, Qt.Key.Key_B)
    qtbot.waitUntil(window.sidebar.isVisible)
    qtbot.mouseClick(window.sidebar_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.sidebar.isVisible())
    _press(qtbot, window, Qt.Key.Key_F)  # Search brings it back, to type into
    qtbot.waitUntil(lambda: window.sidebar.isVisible() and QApplication.focusWidget() is window.search_box)
    assert window.menus.sidebar_action.isChecked()


def test_twelve_tabs_in_a_900_px_window_show_a_readable_part_of_each_title(window, qtbot):
    assert window.width() == 900
    titles = [f"Chat number {i} about a rather long subject" for i in range(12)]
    for i, title in enumerate(titles):
        window.open_tab(i + 1, title)
    bar = window.tabs.tabBar()
    qtbot.waitUntil(lambda: bar.tabRect(11).width() > 0)
    for i, title in enumerate(titles):
        assert bar.tabRect(i).width() >= MIN_TAB_W
        option = QStyleOptionTab()
        bar.initStyleOption(option, i)
        room = bar.style().subElementRect(QStyle.SubElement.SE_TabBarTabText, option, bar).width()  # as Qt draws it
        text = bar.tabText(i)
        shown = bar.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, room)
        assert len(shown.rstrip("…")) >= READABLE_CHARS, (i, shown)
        assert shown == text or shown.endswith("…")  # cut where it is cut, and says so
        assert bar.tabToolTip(i).startswith(title)  # the whole title on hover


def test_the_model_loader_is_wide_at_the_top_centre_with_the_model_and_its_state(window, qtbot):
    picker = window.model_picker
    picker.set_status(ModelStatus("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", LOADING, progress=0.4))
    assert picker.state_label.text() == "loading 40%" and picker.progress.isVisible()
    picker.set_status(ModelStatus("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", READY))
    assert picker.button.text().startswith("Qwen2.5 0.5B Instruct") and picker.settings_label.text() == "Q4_K_M"
    assert picker.state_label.text() == "ready" and not picker.progress.isVisible()
    loader = picker.loader
    assert loader.width() >= LOADER_MIN_W
    centre = loader.mapTo(window, loader.rect().center()).x()
    chats = window.chat_split.mapTo(window, window.chat_split.rect().center()).x()
    assert abs(centre - chats) < 40, (centre, chats)  # over the middle of the chats
    top_of_tabs = window.tabs.mapTo(window, window.tabs.rect().topLeft()).y()
    assert loader.mapTo(window, loader.rect().bottomLeft()).y() <= top_of_tabs  # above the chats


def _reddish(image) -> int:
    """Pixels a user reads as red (a warning), not the greys and the highlight of the theme."""
    count = 0
    for y in range(image.height()):
        for x in range(image.width()):
            c = image.pixelColor(x, y)
            count += c.red() > 160 and c.green() < 110 and c.blue() < 110
    return count


def test_tab_close_buttons_are_quiet_crosses_not_red_squares(window, qtbot):
    """Issue 39, defect 13: the tab in front had a red square close button (the style's
    stock pixmap), read as a warning; each tab now has the same grey cross."""
    for i in range(3):
        window.open_tab(i + 1, f"Chat {i}")
    bar = window.tabs.tabBar()
    qtbot.waitUntil(lambda: bar.tabRect(2).width() > 0)
    assert bar.currentIndex() == 2
    for i in range(3):
        button = bar.tabButton(i, bar.ButtonPosition.RightSide)
        assert button is not None and button.isVisible()
        assert _reddish(button.grab().toImage()) == 0, i
