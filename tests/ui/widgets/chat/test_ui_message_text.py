"""How a message's text is drawn in its bubble (issue 27, defect 10): the line breaks a
user typed with Shift+Enter stay line breaks, and code blocks keep their lines as typed."""

from __future__ import annotations

from PySide6.QtCore import Qt

from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.chat.message_model import MessageView


def _drawn_lines(tab: ChatTab, row: int) -> list[str]:
    """The message's text as its bubble lays it out, one entry a line."""
    view = tab.model.view(row)
    doc = tab.delegate._document(view, 600, tab.font(), tab.palette().text().color())
    return doc.toPlainText().replace("\u2028", "\n").split("\n")


def test_shift_enter_line_breaks_stay_in_the_bubble(qtbot):
    tab = ChatTab(1, "t")
    qtbot.addWidget(tab)
    tab.send_requested.connect(lambda text: tab.model.append(MessageView("m1", "user", text)))
    qtbot.keyClicks(tab.composer, "Dear team,")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(tab.composer, "the build is green.")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    assert _drawn_lines(tab, 0) == ["Dear team,", "the build is green."]


def test_code_in_a_user_message_keeps_its_lines_without_added_spaces(qtbot):
    tab = ChatTab(1, "t")
    qtbot.addWidget(tab)
    tab.model.append(MessageView("m1", "user", "Why?\n```\na = 1\nb = 2\n```"))
    assert [line for line in _drawn_lines(tab, 0) if line] == ["Why?", "a = 1", "b = 2"]
