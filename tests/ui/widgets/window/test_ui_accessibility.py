"""Issue 39 (what users ask for): every control of the window reachable with Tab, in the
order it is laid out, each with a name a screen reader can say. The walk presses Tab on
the focused widget, as a keyboard user does, and reads each control's name through Qt's
accessibility interface (what AT-SPI passes on), not the widget's own fields."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import QApplication, QWidget

LETTER = re.compile(r"[^\W\d_]{2}")  # a word, not a lone glyph like ☰ or ▾


def _name(widget: QWidget) -> str:
    iface = QAccessible.queryAccessibleInterface(widget)
    return iface.text(QAccessible.Text.Name) if iface is not None else ""


def _walk(qtbot, window, start: QWidget, key=Qt.Key.Key_Tab) -> list[QWidget]:
    """The widgets Tab moves through from start until it comes back to it."""
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    start.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is start)
    reached: list[QWidget] = []
    for _ in range(60):
        qtbot.keyClick(QApplication.focusWidget(), key)
        now = QApplication.focusWidget()
        if now is start:
            return reached
        assert now not in reached, f"Tab went round without coming back: {[type(w).__name__ for w in reached]}"
        reached.append(now)
    raise AssertionError("Tab never came back to where it started")


def test_tab_reaches_every_control_in_order_and_each_has_a_name(window, qtbot):
    tab = window.open_tab(1, "A chat")
    qtbot.waitUntil(lambda: tab.composer.isVisible())
    reached = _walk(qtbot, window, tab.composer)
    box = tab.composer_box
    expected = [box.attach_button, box.send_button, window.search_box, window.conversation_list,
                window.new_button, window.sidebar_button, window.model_picker.button, tab.view]
    missing = [type(w).__name__ for w in expected if w not in reached]
    assert not missing, missing
    order = [reached.index(w) for w in expected]
    assert order == sorted(order), "composer, sidebar, top bar, then the messages"
    unnamed = [f"{type(w).__name__}({w.objectName()}): {_name(w)!r}" for w in [tab.composer, *reached]
               if not LETTER.search(_name(w))]
    assert not unnamed, unnamed
    assert _walk(qtbot, window, tab.composer, Qt.Key.Key_Backtab)[::-1] == reached  # Shift+Tab goes back


def test_icon_buttons_that_come_and_go_have_names_too(window, qtbot):
    tab = window.open_tab(1, "A chat")
    window.open_tab(2, "Another")
    tab.set_busy(True)
    bar = window.tabs.tabBar()
    closes = [bar.tabButton(i, bar.ButtonPosition.RightSide) for i in range(bar.count())]
    names = [_name(b) for b in [tab.composer_box.stop_button, *closes]]
    assert names == ["Stop the reply", "Close A chat", "Close Another"]


def test_text_follows_the_system_font_size(window, qtbot, qapp):
    """Sizes are set relative to the application font (no pixel sizes): a larger system
    font makes the messages, and the small print under them, larger."""
    from ui.widgets.chat.message_model import MessageView

    tab = window.open_tab(1, "A chat")
    tab.model.set_messages([MessageView(key="m1", role="user", text="Hello there", status="complete"),
                            MessageView(key="m2", role="assistant", text="Hi! How can I help?", meta="12 tokens")])
    delegate, view = tab.view.delegate, tab.view

    def heights() -> list[int]:
        return [delegate.sizeHint(view.viewOptions() if hasattr(view, "viewOptions") else _option(view),
                                  tab.model.index(row)).height() for row in range(2)]

    normal = qapp.font()
    before = heights()
    try:
        big = type(normal)(normal)
        big.setPointSizeF(normal.pointSizeF() * 1.5)
        qapp.setFont(big)
        qtbot.waitUntil(lambda: view.font().pointSizeF() == big.pointSizeF())
        after = heights()
    finally:
        qapp.setFont(normal)
    assert all(a >= 1.3 * b for a, b in zip(after, before)), (before, after)


def _option(view):
    from PySide6.QtWidgets import QStyleOptionViewItem

    option = QStyleOptionViewItem()
    view.initViewItemOption(option)
    return option
