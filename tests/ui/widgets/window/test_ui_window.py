"""The main window's own behaviour, no model: sizes, shortcuts, tab titles, the sidebar's
marks, Undo, Regenerate's state, the status line (the desktop issue's defects 7 and 8)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics

from ui.widgets.chat.message_model import MessageView
from ui.widgets.compare.compare_view import CompareView
from ui.widgets.window.conversation_list import PIN_MARK, ConversationItem


def test_the_window_fits_900_by_600_and_the_panel_does_not_grow_it(window, qtbot):
    tab = window.open_tab(1, "a chat")
    assert window.minimumSizeHint().width() <= 700
    window.perf_panel.show()
    qtbot.waitUntil(lambda: window.perf_panel.isVisible())
    qtbot.wait(50)  # the dock's layout settles over a couple of events
    assert (window.width(), window.height()) == (900, 600)
    assert tab.view.height() >= 120  # the chat keeps a usable height
    assert window.perf_panel.height() >= 120


def test_the_performance_panel_takes_a_quarter_of_a_900x600_window(window, qtbot):
    """Issue 39, defect 9: it took about 45% of the height, and the chat showed one message,
    shorter than the composer. Now a quarter at most, with a row of charts whole in it."""
    from tests.ui.widgets.perf.test_ui_perf_panel import feed

    tab = window.open_tab(1, "a chat")
    window.perf_panel.show()
    panel = window.perf_panel
    qtbot.waitUntil(lambda: panel.isVisible() and panel.charts_ready())
    feed(panel, 40, gpu=False)
    chart = panel.chart("throughput")
    qtbot.waitUntil(lambda: chart.isVisible() and chart.height() <= panel._scroll.viewport().height())
    assert (window.width(), window.height()) == (900, 600)
    assert panel.height() <= 600 // 4 + 4, panel.height()
    assert tab.view.height() >= 2 * tab.composer_box.height(), (tab.view.height(), tab.composer_box.height())
    top = chart.mapTo(panel._scroll.viewport(), chart.rect().topLeft()).y()
    assert 0 <= top and top + chart.height() <= panel._scroll.viewport().height()  # a row shows whole
    assert panel.summary.height() < 2 * panel.summary.fontMetrics().height()  # one line
    assert panel.summary.toolTip() == panel.summary.text() and "tok/s decode" in panel.summary.text()


def test_ctrl_w_closes_the_current_tab(window, qtbot):
    window.open_tab(1, "first")
    window.open_tab(2, "second")
    window.activateWindow()
    qtbot.keyClick(window.tabs.currentWidget().composer, Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.tabs.count() == 1)
    assert window.tab_for(2) is None and window.tab_for(1) is not None


def test_a_new_tab_has_the_composer_focused(window, qtbot):
    window.activateWindow()
    tab = window.open_tab(7, "")
    qtbot.waitUntil(lambda: tab.composer.hasFocus())


def test_an_untitled_comparison_takes_its_title_when_it_gets_one(window):
    view, made = window.open_compare(3, "")
    assert made and isinstance(view, CompareView)
    index = window.tabs.indexOf(view)
    assert window.tabs.tabText(index).endswith("New comparison")
    window.set_tab_title(view, "Which sorting algorithm")
    assert window.tabs.tabText(index).endswith("Which sorting algorithm")


def test_the_pin_mark_is_drawn_by_the_ui_font(window):
    window.set_conversations([ConversationItem(1, "Pinned chat", pinned=True)])
    assert window.conversation_list.item(0).text() == PIN_MARK + "Pinned chat"
    metrics = QFontMetrics(window.conversation_list.font())
    assert metrics.inFontUcs4(ord(PIN_MARK[0])), "the pin mark would draw as an empty box"


def test_undo_shows_beside_its_message_and_a_later_timeout_keeps_a_newer_offer(window):
    window.offer_undo_delete(1, "first")
    window.offer_undo_delete(2, "second")
    assert window.status.undo_button.isVisible() and window.status.undo_label.text() == "Deleted “second”"
    window.status.hide_undo(1)  # the first offer's timer: the newer offer stays
    assert window.status.undo_button.isVisible()
    emitted = []
    window.undo_delete_requested.connect(emitted.append)
    window.status.undo_button.click()
    assert emitted == [2] and not window.status.undo_button.isVisible() and not window.status.undo_label.isVisible()


def test_regenerate_needs_a_question(window):
    tab = window.open_tab(1, "with a system prompt")
    tab.model.set_messages([MessageView(key="m1", role="system", text="Be brief.", status="complete")])
    tab.set_busy(False)
    assert not tab.regenerate_button.isEnabled()
    tab.model.set_messages([MessageView(key="m1", role="system", text="Be brief.", status="complete"),
                            MessageView(key="m2", role="user", text="Hi", status="complete")])
    tab.set_busy(False)
    assert tab.regenerate_button.isEnabled()
    tab.set_busy(True)
    assert not tab.regenerate_button.isEnabled() and not tab.send_button.isEnabled()


def test_the_status_line_says_idle_and_keeps_slow_rates():
    from app.engines.finish import rate_text as rate
    from inference.core.metrics import MetricsSnapshot
    from ui.controllers.engine_status import status_line

    fields = {name: 0 for name in MetricsSnapshot.__dataclass_fields__}
    idle = MetricsSnapshot(**{**fields, "decode_tok_s": 5.0})
    assert status_line("m.gguf", idle, 0, 0) == "m · idle"
    assert status_line("SmolLM2-135M-Instruct.Q4_1.gguf", idle, 0, 0) == "SmolLM2 135M Instruct · idle"  # as the picker
    busy = MetricsSnapshot(**{**fields, "running": 2, "decode_tok_s": 0.4, "last_step_seqs": 2})
    assert status_line("m.gguf", busy, 2, 1) == "m · 2 writing · 1 waiting · 0.4 tok/s in all · batch 2"
    assert rate(123.4) == "123 tok/s"


def test_serve_over_http_asks_in_a_dialog_that_leaves_the_event_loop_running(window, qtbot):
    from ui.widgets.settings.server_dialog import ServerDialog

    asked = []
    window.server_start_requested.connect(lambda *args: asked.append(args))
    window.menus.serve_action.trigger()  # returns at once: the dialog is open, not exec()'d
    dialog = next(w for w in window.findChildren(ServerDialog))
    qtbot.waitUntil(dialog.isVisible)
    dialog.accept()
    assert len(asked) == 1 and asked[0][0] == "127.0.0.1"
    window.menus.serve_action.setChecked(False)
    window.menus.serve_action.trigger()
    dialog = next(w for w in window.findChildren(ServerDialog) if w.isVisible())
    dialog.reject()
    assert not window.menus.serve_action.isChecked()


def test_the_sidebar_marks_the_tab_in_front_by_click_and_by_ctrl_tab(window, qtbot):
    """Issue 39, defect 12: the sidebar's highlight stayed on the chat last clicked there
    while other tabs came to the front."""
    from PySide6.QtWidgets import QApplication

    window.set_conversations([ConversationItem(i, f"chat {i}") for i in (1, 2, 3)])
    for i in (1, 2, 3):
        window.open_tab(i, f"chat {i}")
    lst = window.conversation_list

    def marked() -> int | None:
        item = lst.currentItem()
        return int(item.data(Qt.ItemDataRole.UserRole)) if item is not None and item.isSelected() else None

    assert marked() == 3
    bar = window.tabs.tabBar()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(0).center())
    qtbot.waitUntil(lambda: marked() == 1)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    qtbot.keyClick(QApplication.focusWidget() or window, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: marked() == 2)
    window.set_conversations([ConversationItem(i, f"chat {i}") for i in (3, 2, 1)])  # a refill keeps it
    assert marked() == 2
