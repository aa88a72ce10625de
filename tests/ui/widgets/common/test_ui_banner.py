"""The banner above a composer ("Queued: …", "Editing a message ·") with its Cancel button:
the widget on its own, then the two places that show one."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from tests.support.shown import shown
from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.common.banner import Banner


def test_a_banner_is_hidden_until_shown_and_cancel_says_so_by_mouse_or_key(qtbot):
    owner = QWidget()
    host = Banner("Queued: sent when the reply ends", "Keep it", "queueLabel")
    QVBoxLayout(owner).addWidget(host)
    shown(qtbot, owner, 400, 60)
    assert host.isHidden()  # its owner shows it
    host.show()
    assert host.label.text() == "Queued: sent when the reply ends" and host.label.objectName() == "queueLabel"
    assert host.cancel_button.text() == "Cancel" and host.cancel_button.toolTip() == "Keep it"
    cancelled = []
    host.cancelled.connect(lambda: cancelled.append(True))
    qtbot.mouseClick(host.cancel_button, Qt.MouseButton.LeftButton)
    assert cancelled == [True]
    host.cancel_button.setFocus()
    qtbot.keyClick(host.cancel_button, Qt.Key.Key_Space)  # a keyboard user's Cancel
    qtbot.waitUntil(lambda: len(cancelled) == 2)
    assert host.isVisible()  # what Cancel undoes, and hiding the banner, is the owner's
    host.set_text("Editing a message ·")
    assert host.label.text() == "Editing a message ·"


def test_the_queued_and_the_editing_lines_are_both_banners_with_their_texts(qtbot):
    tab = shown(qtbot, ChatTab(1, "a chat"), 700, 500)
    queue, edit = tab.composer_box.queue_bar, tab.edit_banner
    assert isinstance(queue, Banner) and isinstance(edit, Banner)
    assert (queue.label.objectName(), edit.label.objectName()) == ("queueLabel", "editBanner")
    assert queue.cancel_button.toolTip() == "Keep the message here without sending it"
    assert edit.cancel_button.toolTip() == "Stop editing; the message stays as it was"
    assert queue.isHidden() and edit.isHidden()
    tab.composer.setPlainText("half typed")
    tab.start_editing(7, "the old question")
    assert edit.isVisible() and edit.label.text() == "Editing a message ·"
    qtbot.keyClick(edit.cancel_button, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: edit.isHidden())
    assert tab.composer.toPlainText() == "half typed" and tab.editing is None
