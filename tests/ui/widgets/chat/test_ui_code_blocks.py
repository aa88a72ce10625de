"""Code blocks in a reply: long lines wrap inside the bubble, each block has a toolbar with
its language and a Copy button that puts its code on the clipboard (the desktop issue's
defect 6). Real widgets offscreen, real clicks, real pixels."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from tests.support.message_rows import row_document, view_point
from ui.theme import dark_palette, light_palette
from ui.widgets.chat.code_highlight import COLORS
from ui.widgets.chat.message_delegate import COPIED_MS
from ui.widgets.chat.message_list import MessageList
from ui.widgets.chat.message_model import MessageListModel, MessageView

LONG = "x = " + " + ".join(f"value_{i}" for i in range(40))  # far wider than the bubble
REPLY = f"Here:\n\n```python\ndef f():\n    {LONG}\n```\n\nand a shell one:\n\n```bash\nls -l\n```\n"


@pytest.fixture
def shown(qtbot):
    model = MessageListModel()
    model.set_messages([MessageView(key="m1", role="assistant", text=REPLY, status="complete")])
    view = MessageList(model)
    qtbot.addWidget(view)
    view.resize(520, 700)
    view.show()
    qtbot.waitExposed(view)
    qtbot.waitUntil(lambda: view.visualRect(model.index(0)).height() > 100)
    return view


def _doc(view):
    return row_document(view, 0)


def test_long_code_lines_wrap_inside_the_bubble(shown):
    doc = _doc(shown)
    long_line = next(b for b in _blocks(doc) if b.text().strip().startswith("x = "))
    assert long_line.layout().lineCount() > 1  # wrapped, not clipped at the bubble's edge
    assert doc.idealWidth() <= doc.textWidth() + 1


def _blocks(doc):
    block = doc.begin()
    while block.isValid():
        yield block
        block = block.next()


def test_each_code_block_has_its_language_and_copy_copies_it(shown, qtbot):
    doc = _doc(shown)
    bars = shown.delegate.code_toolbars(doc)
    firsts = [(b.language, b.code.splitlines()[0]) for b, _bar, _copy in bars]
    assert firsts == [("python", "def f():"), ("bash", "ls -l")]
    assert bars[0][0].code == f"def f():\n    {LONG}"
    # Click the second block's Copy where it is painted on screen.
    copy_rect = bars[1][2]  # the bash block's Copy
    click = view_point(shown, 0, copy_rect.center())
    copied = []
    shown.delegate.code_copied.connect(copied.append)
    qtbot.mouseClick(shown.viewport(), Qt.MouseButton.LeftButton, pos=click)
    assert copied == ["ls -l"]
    assert QGuiApplication.clipboard().text() == "ls -l"
    assert shown.delegate.copied == ("m1", bars[1][0].first_block)
    # "Copied ✓" says it for a moment, then the button is Copy again (issue 27, defect 10)
    qtbot.waitUntil(lambda: shown.delegate.copied is None, timeout=COPIED_MS + 2000)


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_the_code_box_shows_on_the_bubble(qtbot, dark):
    from ui.widgets.chat.message_delegate import bubble_color

    palette = dark_palette() if dark else light_palette()
    bubble = bubble_color(palette, "assistant", "complete")
    code_bg = COLORS[dark]["bg"]
    assert code_bg.lower() != bubble.name().lower()
    model = MessageListModel()
    model.set_messages([MessageView(key="m1", role="assistant", text=REPLY, status="complete")])
    view = MessageList(model)
    view.setPalette(palette)
    qtbot.addWidget(view)
    view.resize(520, 500)
    view.show()
    qtbot.waitExposed(view)
    qtbot.waitUntil(lambda: view.visualRect(model.index(0)).height() > 100)
    image = view.viewport().grab().toImage()
    colours = {image.pixelColor(x, y).name() for x in range(0, image.width(), 3) for y in range(0, image.height(), 3)}
    assert code_bg.lower() in colours and bubble.name().lower() in colours


def test_a_reply_that_opens_with_code_keeps_its_toolbar_below_the_header(qtbot):
    """Qt lays a document's first block out without its top margin: a reply starting with a
    code block had its language and Copy drawn over the message's header."""
    model = MessageListModel()
    model.set_messages([MessageView(key="m1", role="assistant", text="```python\nprint(1)\n```\nDone.",
                                    status="complete")])
    view = MessageList(model)
    qtbot.addWidget(view)
    view.resize(520, 400)
    view.show()
    qtbot.waitExposed(view)
    [(block, bar, copy)] = view.delegate.code_toolbars(_doc(view))
    assert block.code == "print(1)"
    assert bar.top() >= 0 and copy.top() >= 0  # inside the document, not up in the header
    code_top = _doc(view).documentLayout().blockBoundingRect(_doc(view).begin()).top()
    assert bar.bottom() <= code_top  # and above the code, not over it
