"""Widgets on their own: the code highlighter, the message model, the composer."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument

from ui.widgets.code_highlight import highlight_code_blocks
from ui.widgets.message_model import MessageListModel, MessageView


def test_code_blocks_are_coloured_and_prose_is_not(qapp):
    doc = QTextDocument()
    doc.setMarkdown("Some prose with if and return.\n\n```python\ndef f(x):  # note\n    return 'hi' + 42\n```\n")
    assert highlight_code_blocks(doc, dark=False) == 2
    colours = {}
    block = doc.begin()
    while block.isValid():
        for frag in _fragments(block):
            colours[frag.text()] = frag.charFormat().foreground().color().name()
        block = block.next()
    assert colours["def"] == "#0b57d0" and colours["return"] == "#0b57d0"
    assert colours["'hi'"] == "#188038" and colours["42"] == "#b45309"
    assert colours["# note"] == "#6b7280"
    prose = next(t for t in colours if t.startswith("Some prose"))
    assert colours[prose] != "#0b57d0"  # keywords in prose stay plain


def _fragments(block):
    it = block.begin()
    while not it.atEnd():
        frag = it.fragment()
        if frag.isValid():
            yield frag
        it += 1


def test_streaming_updates_touch_one_row(qapp):
    model = MessageListModel()
    model.set_messages([MessageView(f"m{i}", "user" if i % 2 else "assistant", f"text {i}") for i in range(1000)])
    changed = []
    model.dataChanged.connect(lambda first, last, *_: changed.append((first.row(), last.row())))
    model.append(MessageView("m-live", "assistant", "", status="streaming"))
    for piece in ("Hel", "lo", " world"):
        model.append_text("m-live", piece)
    assert changed == [(1000, 1000)] * 3
    assert model.view(1000).text == "Hello world"


def test_composer_enter_sends_and_shift_enter_adds_a_line(qtbot):
    from ui.widgets.chat_tab import ChatTab

    tab = ChatTab(1, "t")
    qtbot.addWidget(tab)
    sent = []
    tab.send_requested.connect(sent.append)
    qtbot.keyClicks(tab.composer, "line one")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(tab.composer, "line two")
    assert sent == []
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    assert sent == ["line one\nline two"]
    assert tab.composer.toPlainText() == ""
