"""Widgets on their own: the code highlighter, the message model and its painted bubbles,
the composer, the differences dialog."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument

from app.compare.word_diff import Op, diff_words
from tests.support.pixels import bubble_colour
from ui.theme import dark_palette, light_palette
from ui.widgets.chat.code_highlight import highlight_code_blocks
from ui.widgets.chat.message_delegate import bubble_color
from ui.widgets.chat.message_list import MessageList
from ui.widgets.chat.message_model import MessageListModel, MessageView
from ui.widgets.compare.diff_dialog import DiffDialog


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


def test_code_blocks_are_found_for_copying():
    from ui.widgets.chat.chat_tab import code_blocks

    text = "Here:\n```python\nprint('hi')\n```\nand\n```\nls -l\n```"
    assert code_blocks(text) == ["print('hi')", "ls -l"]


def test_composer_enter_sends_and_shift_enter_adds_a_line(qtbot):
    from ui.widgets.chat.chat_tab import ChatTab

    tab = ChatTab(1, "t")
    qtbot.addWidget(tab)
    sent = []
    tab.send_requested.connect(lambda text, documents: sent.append((text, documents)))
    qtbot.keyClicks(tab.composer, "line one")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(tab.composer, "line two")
    assert sent == []
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    assert sent == [("line one\nline two", ())]
    assert tab.composer.toPlainText() == ""


def test_bubbles_are_painted_in_the_theme_s_colours(qtbot):
    painted = {}
    for theme, palette in (("light", light_palette()), ("dark", dark_palette())):
        model = MessageListModel()
        model.set_messages([MessageView("u", "user", "Hello"), MessageView("a", "assistant", "Hi!\n\nHow can I help?")])
        view = MessageList(model)
        qtbot.addWidget(view)
        view.setPalette(palette)
        view.resize(420, 320)
        view.show()
        qtbot.waitUntil(lambda v=view, m=model: v.visualRect(m.index(1)).height() > 40)  # laid out in batches
        image = view.grab().toImage()
        painted[theme] = [bubble_colour(image, view, view, row) for row in (0, 1)]
        assert painted[theme] == [bubble_color(palette, role, "complete").name() for role in ("user", "assistant")]
    assert painted == {"light": ["#e3eefc", "#f1f3f5"], "dark": ["#27415e", "#2b2d31"]}


def _diff(old: str, new: str):
    d = diff_words(old, new)
    return [(r.op.value, r.text) for r in d.runs], d.similarity


def _shown_runs(dialog: DiffDialog) -> list[tuple[str, bool, str]]:
    """(text, struck through, background) of each piece of the dialog's text as laid out."""
    runs = []
    block = dialog.browser.document().begin()
    while block.isValid():
        for frag in _fragments(block):
            fmt = frag.charFormat()
            brush = fmt.background()
            background = brush.color().name() if brush.style() != Qt.BrushStyle.NoBrush else ""
            runs.append((frag.text(), fmt.fontStrikeOut(), background))
        block = block.next()
    return runs


def test_the_differences_dialog_strikes_what_only_the_left_says_and_greens_what_only_the_right_does(qtbot):
    answers = [("A", "The sea is blue today."), ("B", "The sea is green today."), ("C", "The sea is blue today.")]
    dialog = DiffDialog(answers, _diff)
    qtbot.addWidget(dialog)
    expected = diff_words(answers[0][1], answers[1][1])
    assert [r.op for r in expected.runs] == [Op.EQUAL, Op.DELETE, Op.INSERT, Op.EQUAL]
    assert dialog.similarity.text().startswith(f"{100 * expected.similarity:.0f}% of the words agree")
    assert _shown_runs(dialog) == [
        ("The sea is ", False, ""), ("blue", True, "#fddede"), ("green", False, "#d9f5dd"), (" today.", False, ""),
    ]
    dialog.right.setCurrentIndex(2)  # A against its identical twin: nothing marked
    assert dialog.similarity.text().startswith("100% of the words agree")
    assert _shown_runs(dialog) == [("The sea is blue today.", False, "")]


def test_an_image_chip_is_a_thumbnail_beside_its_name_and_its_row_as_tall_as_it(qapp):
    from PySide6.QtGui import QColor, QImage, QPainter, QPalette

    from storage import AttachmentRecord
    from ui.widgets.chat.message_chips import THUMB, chip_rects, chips_height, message_chips, paint_chips

    image = AttachmentRecord(1, 0, "red.png", "a" * 64, "image/png", 2048, None, 0, is_image=True)
    notes = AttachmentRecord(1, 1, "notes.md", "b" * 64, "text/markdown", 900, None, 400)
    chips = message_chips(MessageView(key="u1", role="user", text="Look", attachments=(image, notes)))
    assert [c.text for c in chips] == ["red.png · PNG image · 2 KB", "notes.md · 900 B · 400 characters"]
    assert [c.is_image for c in chips] == [True, False]
    font = qapp.font()
    wide = chip_rects(chips, 800, font)
    assert wide[0].height() == THUMB + 8 and wide[1].top() == 0  # one row, as tall as the thumbnail
    narrow = chip_rects(chips, wide[0].width() + 10, font)
    assert narrow[1].top() == wide[0].height() + 6  # wrapped under the image's whole height
    assert chips_height(chips, 800, font) == THUMB + 8 + 6

    red = QImage(40, 30, QImage.Format.Format_RGB32)
    red.fill(QColor("#c81e1e"))
    canvas = QImage(800, 100, QImage.Format.Format_RGB32)
    for shown, expected in ((None, False), (red, True)):
        canvas.fill(QColor("white"))
        painter = QPainter(canvas)
        paint_chips(painter, chips, 800, font, QPalette(), lambda sha, s=shown: s if sha == image.sha256 else None)
        painter.end()
        middle = canvas.pixelColor(4 + THUMB // 2, 4 + THUMB // 2)
        assert (middle.red() > 150 and middle.green() < 80) is expected
