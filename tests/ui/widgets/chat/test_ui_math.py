"""LaTeX math in a reply (issue 27): `$…$`, `\\(…\\)` inline and `$$…$$`, `\\[…\\]` display,
rendered as images in the text's colour (both themes), prices left as prose, formulas in
code left alone, and the message copied as its LaTeX source. Real widgets offscreen, real
pixels; screenshots math.png (light) and math-dark.png."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QUrl
from PySide6.QtGui import QGuiApplication, QPalette, QTextDocument
from PySide6.QtWidgets import QMenu

from app.chats import latex
from tests.support.gui_app import SCREENSHOTS
from tests.support.message_rows import row_document
from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.chat.math_images import SCHEME, math_images
from ui.widgets.chat.message_model import MessageView

QUESTION = "What is the Gaussian integral, and what does a $5 and $10 ticket cost together?"
REPLY = (
    "The Gaussian integral is\n\n"
    "$$\\int_{-\\infty}^{\\infty} e^{-x^2}\\,dx = \\sqrt{\\pi}$$\n\n"
    "so with $a > 0$, \\(\\int e^{-a x^2} dx = \\sqrt{\\pi / a}\\). Euler's identity $e^{i\\pi} + 1 = 0$ "
    "ties $e$, $i$ and $\\pi$ together, and the sum\n\n"
    "\\[\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\\]\n\n"
    "gives 55 for $n = 10$. The tickets: $5 and $10 make $15. In code, `echo $HOME$` stays code."
)
FORMULAS = 9  # two display, seven inline


def _tab(qtbot, width=760, height=560) -> ChatTab:
    tab = ChatTab(1, "math")
    qtbot.addWidget(tab)
    tab.resize(width, height)
    tab.model.set_messages([MessageView(key="m1", role="user", text=QUESTION, message_id=1),
                            MessageView(key="m2", role="assistant", text=REPLY, message_id=2,
                                        meta="0.18 s to first token · 41 tok/s · 122 tokens")])
    tab.show()
    qtbot.waitExposed(tab)
    return tab


def _doc(tab, row) -> QTextDocument:
    return row_document(tab.view, row)


def _images(doc) -> list[str]:
    names, block = [], doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isImageFormat() and fmt.toImageFormat().name().startswith(SCHEME):
                names.append(fmt.toImageFormat().name())
            it += 1
        block = block.next()
    return names


def test_math_is_drawn_in_the_text_colour_and_prices_stay_prose(qtbot, theme):
    tab = _tab(qtbot)
    # The first formula starts matplotlib's warm-up off the GUI thread; the rows are laid
    # out again once it is ready.
    qtbot.waitUntil(lambda: latex.ready() and len(_images(_doc(tab, 1))) == FORMULAS, timeout=20_000)
    doc = _doc(tab, 1)
    text = doc.toPlainText()
    assert "$5 and $10 make $15" in text  # prices are prose
    assert "echo $HOME$" in text  # code is code
    assert "\\int" not in text and "\\frac" not in text  # every formula became an image
    assert _images(_doc(tab, 0)) == []  # the question's "$5 and $10" too
    # Each image is the formula in the palette's text colour: light on dark, dark on light.
    colour = tab.view.palette().color(QPalette.ColorRole.Text)
    for name in _images(doc):
        image = doc.resource(QTextDocument.ResourceType.ImageResource, QUrl(name))
        assert image is not None and not image.isNull(), name
        inked = [image.pixelColor(x, y) for y in range(image.height()) for x in range(image.width())
                 if image.pixelColor(x, y).alpha() > 160]
        assert inked and all(c.rgb() == colour.rgb() for c in inked)
    # Display math is a centred paragraph of its own.
    display = [b for b in _blocks(doc) if b.text() == "\ufffc"]
    assert len(display) == 2 and all(b.blockFormat().alignment() & 0x4 for b in display)  # AlignHCenter
    qtbot.waitUntil(lambda: tab.view.visualRect(tab.model.index(1)).height() > 200)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert tab.grab().save(str(SCREENSHOTS / ("math.png" if theme == "light" else "math-dark.png")))


def test_formulas_are_cached_by_source_colour_and_size(qtbot):
    tab = _tab(qtbot)
    qtbot.waitUntil(lambda: latex.ready() and len(_images(_doc(tab, 1))) == FORMULAS, timeout=20_000)
    images = math_images()
    before = images.rendered
    tab.view.delegate._docs.clear()  # a new layout of the same text: nothing rendered again
    assert len(_images(_doc(tab, 1))) == FORMULAS and images.rendered == before


def test_copying_the_message_copies_its_latex_source(qtbot):
    tab = _tab(qtbot)
    rect = tab.view.visualRect(tab.model.index(1))
    tab._context_menu(QPoint(rect.center().x(), rect.top() + 30))
    menu = next(m for m in tab.findChildren(QMenu) if m.isVisible())
    copy = next(a for a in menu.actions() if a.text() == "Copy text")
    copy.trigger()
    menu.close()
    assert QGuiApplication.clipboard().text() == REPLY


def test_a_formula_mathtext_cannot_read_is_shown_as_its_source(qtbot):
    tab = _tab(qtbot)
    tab.model.set_messages([MessageView(key="m9", role="assistant", text="Bad: $\\begin{align} x \\end{align}$ ok",
                                        message_id=9)])
    qtbot.waitUntil(lambda: latex.ready())
    tab.view.delegate._docs.clear()
    doc = _doc(tab, 0)
    assert _images(doc) == [] and "$\\begin{align} x \\end{align}$" in doc.toPlainText()


def _blocks(doc):
    block = doc.begin()
    while block.isValid():
        yield block
        block = block.next()
