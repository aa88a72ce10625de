"""The main window's own behaviour, no model: sizes, shortcuts, tab titles, the sidebar's
marks, Undo, Regenerate's state, the status line (the desktop issue's defects 7 and 8)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics

from ui.widgets.compare_view import CompareView
from ui.widgets.conversation_list import PIN_MARK, ConversationItem
from ui.widgets.message_model import MessageView


def test_the_window_fits_900_by_600_and_the_panel_does_not_grow_it(window, qtbot):
    tab = window.open_tab(1, "a chat")
    assert window.minimumSizeHint().width() <= 700
    window.perf_panel.show()
    qtbot.waitUntil(lambda: window.perf_panel.isVisible())
    qtbot.wait(50)  # the dock's layout settles over a couple of events
    assert (window.width(), window.height()) == (900, 600)
    assert tab.view.height() >= 120  # the chat keeps a usable height
    assert window.perf_panel.height() >= 200


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
    assert window.undo_button.isVisible() and window.undo_label.text() == "Deleted “second”"
    window._hide_undo(1)  # the first offer's timer: the newer offer stays
    assert window.undo_button.isVisible()
    emitted = []
    window.undo_delete_requested.connect(emitted.append)
    window.undo_button.click()
    assert emitted == [2] and not window.undo_button.isVisible() and not window.undo_label.isVisible()


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
    assert status_line("m.gguf", idle, 0, 0) == "m.gguf · idle"
    busy = MetricsSnapshot(**{**fields, "running": 2, "decode_tok_s": 0.4, "last_step_seqs": 2})
    assert status_line("m.gguf", busy, 2, 1) == "m.gguf · 2 writing · 1 waiting · 0.4 tok/s · batch 2"
    assert rate(123.4) == "123 tok/s"


def test_serve_over_http_asks_in_a_dialog_that_leaves_the_event_loop_running(window, qtbot):
    from ui.widgets.server_dialog import ServerDialog

    asked = []
    window.server_start_requested.connect(lambda *args: asked.append(args))
    window.serve_action.trigger()  # returns at once: the dialog is open, not exec()'d
    dialog = next(w for w in window.findChildren(ServerDialog))
    qtbot.waitUntil(dialog.isVisible)
    dialog.accept()
    assert len(asked) == 1 and asked[0][0] == "127.0.0.1"
    window.serve_action.setChecked(False)
    window.serve_action.trigger()
    dialog = next(w for w in window.findChildren(ServerDialog) if w.isVisible())
    dialog.reject()
    assert not window.serve_action.isChecked()
