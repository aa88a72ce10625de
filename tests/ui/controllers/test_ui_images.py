"""Images in the desktop app (issue 36): pasted with Ctrl+V, dropped or chosen with the
paperclip; a chip with a thumbnail (a broken image a red chip with the engine's one-line
reason); stored once by sha256 with the message, whose chip shows the thumbnail and opens
the image large. A model without a projector is said so on the chip and reads
"[image: NAME]"; on the real model with the tests' tiny projector the image is encoded once
and a second question about it encodes nothing. Screenshots: images-light.png and
images-dark.png in the screenshots folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QAccessible, QColor, QDragEnterEvent, QDropEvent, QImage
from PySide6.QtWidgets import QApplication

from app.conversations.image_files import NOT_SEEN
from storage import DocumentRepository
from tests.inference.core.test_engine_images import BLUE, RED
from tests.support.desk import Desk, ScriptedEngine
from tests.support.gui_app import SCREENSHOTS
from ui.widgets.chat.attachment_chips import ChipState
from ui.widgets.chat.message_chips import THUMB


@pytest.fixture(autouse=True)
def active(desk, qtbot) -> None:
    """The window in front: only an active window has a focus widget to type into."""
    desk.window.activateWindow()
    qtbot.waitUntil(desk.window.isActiveWindow)


def _tab(desk: Desk, title: str = "images"):
    conv = desk.repo.create_conversation(title=title)
    desk.controllers.conversations.open_conversation(conv.id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    return desk.window.tab_for(conv.id)


def _file(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _drop(widget, *paths: Path) -> None:
    """A drag of files entering widget and dropped there, as the window system sends them."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    pos, actions, button = QPointF(widget.width() / 2, widget.height() / 2), Qt.DropAction.CopyAction, \
        Qt.MouseButton.LeftButton
    enter = QDragEnterEvent(pos.toPoint(), actions, mime, button, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, enter)
    assert enter.isAccepted()
    QApplication.sendEvent(widget, QDropEvent(pos, actions, mime, button, Qt.KeyboardModifier.NoModifier))


def _ready(qtbot, tray, count: int = 1):
    qtbot.waitUntil(lambda: len(tray.chips()) == count and not tray.extracting(), timeout=30_000)
    return tray.chips()


def _paste(qtbot, tab, image: QImage) -> None:
    QApplication.clipboard().setImage(image)
    tab.composer.setFocus()
    qtbot.keyClick(tab.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)


def _screenshot_image(color: str = "#d03030") -> QImage:
    image = QImage(320, 200, QImage.Format.Format_RGB32)
    image.fill(QColor(color))
    return image


def _send(desk: Desk, engine: ScriptedEngine, tab, text: str) -> None:
    before = len(engine.requests)
    desk.qtbot.keyClicks(tab.composer, text)
    desk.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == before + 1)


def _is_reddish(color: QColor) -> bool:
    return color.red() > 150 and color.green() < 90 and color.blue() < 90


def test_an_image_pasted_with_ctrl_v_is_a_chip_and_its_name_goes_to_a_blind_model(desk, engine, qtbot):
    tab = _tab(desk)
    _paste(qtbot, tab, _screenshot_image())
    (chip,) = _ready(qtbot, tab.composer_box.tray)
    assert chip.state is ChipState.READY and chip.name_label.text() == "pasted image 1.png"
    assert tab.composer.toPlainText() == ""  # not typed in
    assert chip.thumbnail.isVisible() and not chip.thumbnail.icon().isNull()
    iface = QAccessible.queryAccessibleInterface(chip.thumbnail)
    assert iface.text(QAccessible.Text.Name) == "Show pasted image 1.png"  # what a screen reader says
    size = chip.document.size_bytes
    assert chip.details.text() == (f"PNG image · {size / 1000:.0f} KB" if size >= 1000 else f"PNG image · {size} B") \
        + "\n" + NOT_SEEN.replace(": ", ":\n")  # whole, not elided
    assert QImage.fromData(chip.document.data).size().toTuple() == (320, 200)  # the pixels, as PNG

    _send(desk, engine, tab, "What is this?")
    (user,) = [m for m in engine.chats[0].messages if m["role"] == "user"]
    assert user["content"] == "[image: pasted image 1.png]\nWhat is this?"  # the scripted engine has no projector
    stored = desk.repo.active_path(tab.conversation_id)
    (attached,) = stored.attachments[stored.messages[0].id]
    assert attached.is_image and attached.name == "pasted image 1.png" and attached.mime == "image/png"

    # The same pixels again, in the next message: a second chip name, one stored image.
    engine.end(engine.requests[-1])
    _paste(qtbot, tab, _screenshot_image())
    (again,) = _ready(qtbot, tab.composer_box.tray)
    assert again.name_label.text() == "pasted image 2.png" and again.document.sha256 == attached.sha256
    _send(desk, engine, tab, "And now?")
    desk.settled()
    documents = DocumentRepository(desk.db)
    assert documents.document(attached.sha256).data == chip.document.data
    with desk.db.session() as s:
        from sqlalchemy import text

        assert s.execute(text("SELECT count(*) FROM documents")).scalar() == 1


def test_an_image_dropped_on_the_tab_is_read_with_its_thumbnail(desk, engine, qtbot, tmp_path):
    tab = _tab(desk)
    _drop(tab, _file(tmp_path, "red.png", RED))
    (chip,) = _ready(qtbot, tab.composer_box.tray)
    assert chip.state is ChipState.READY and chip.is_image and chip.document.data == RED
    pixmap = chip.thumbnail.icon().pixmap(chip.thumbnail.iconSize())
    middle = pixmap.toImage().pixelColor(pixmap.width() // 2, pixmap.height() // 4)
    assert _is_reddish(middle), middle.name()  # the image's own pixels, not an icon
    assert chip.details.text().endswith(NOT_SEEN.replace(": ", ":\n"))


@pytest.mark.parametrize("name, data, words", [
    ("cut.png", RED[: len(RED) // 2], "the image could not be decoded"),
    ("notes.png", b"plain text that only says it is a picture", "the image is not a PNG, JPEG, GIF, WebP or BMP"),
])
def test_a_broken_image_is_a_red_chip_with_one_line(desk, engine, qtbot, tmp_path, name, data, words):
    tab = _tab(desk)
    _drop(tab, _file(tmp_path, name, data))
    (chip,) = _ready(qtbot, tab.composer_box.tray)
    assert chip.state is ChipState.FAILED and chip.details.property("failed") is True
    assert chip.error.startswith(words) and "\n" not in chip.error and "Traceback" not in chip.error
    assert not chip.thumbnail.isVisible()
    qtbot.keyClicks(tab.composer, "What is it?")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    desk.settled()
    assert engine.requests == [] and tab.composer_box.notice.isVisible()  # held back, as for a document


def test_a_sent_image_shows_its_thumbnail_and_opens_large(desk, engine, qtbot, tmp_path):
    tab = _tab(desk)
    _drop(tab, _file(tmp_path, "red.png", RED))
    (chip,) = _ready(qtbot, tab.composer_box.tray)
    qtbot.mouseClick(chip.thumbnail, Qt.MouseButton.LeftButton)  # the composer's chip, before sending
    viewer = desk.controllers.sending.viewer
    qtbot.waitUntil(lambda: viewer.image_dialog is not None and viewer.image_dialog.image is not None)
    assert viewer.image_dialog.image.size().toTuple() == (40, 30) and not viewer.image_dialog.isModal()
    viewer.image_dialog.close()

    _send(desk, engine, tab, "Describe it.")
    qtbot.waitUntil(lambda: tab.model.rowCount() == 2 and bool(tab.view.chip_boxes(0)))
    (sent, box), = tab.view.chip_boxes(0)
    assert sent.is_image and sent.text.startswith("red.png · PNG image · ")
    sha = sent.target.sha256
    qtbot.waitUntil(lambda: desk.ctx.thumbnails.get(sha) is not None)
    inside = box.topLeft() + type(box.topLeft())(4 + THUMB // 2, 4 + THUMB // 4)
    qtbot.waitUntil(lambda: _is_reddish(tab.view.viewport().grab().toImage().pixelColor(inside)))

    qtbot.mouseClick(tab.view.viewport(), Qt.MouseButton.LeftButton, pos=box.center())
    qtbot.waitUntil(lambda: viewer.image_dialog is not None and viewer.image_dialog.isVisible()
                    and viewer.image_dialog.image is not None)
    dialog = viewer.image_dialog
    assert dialog.windowTitle() == "red.png" and dialog.image.size().toTuple() == (40, 30)
    assert "40×30" in dialog.details.text()


def test_an_image_given_back_after_a_failed_store_keeps_its_thumbnail(desk, engine, qtbot, tmp_path, monkeypatch):
    from storage import StorageError

    tab = _tab(desk)
    _drop(tab, _file(tmp_path, "red.png", RED))
    (chip,) = _ready(qtbot, tab.composer_box.tray)

    def full(*_args, **_kwargs):
        raise StorageError("database or disk is full")

    monkeypatch.setattr(desk.repo, "add_message", full)
    qtbot.keyClicks(tab.composer, "What is it?")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: tab.composer.toPlainText() == "What is it?" and len(tab.composer_box.tray.chips()) == 1)
    (back,) = tab.composer_box.tray.chips()
    assert back is not chip and back.document.data == RED and back.state is ChipState.READY
    qtbot.waitUntil(back.thumbnail.isVisible)
    pixmap = back.thumbnail.icon().pixmap(back.thumbnail.iconSize())
    assert _is_reddish(pixmap.toImage().pixelColor(pixmap.width() // 2, pixmap.height() // 4))
    assert engine.requests == []


def test_screenshots_of_image_chips(desk, engine, qtbot, tmp_path, theme):
    """The composer holding an image, a broken one and a pasted screenshot, over a sent
    message with its thumbnail; in the light and the dark theme."""
    tab = _tab(desk, "What is in the picture?")
    desk.window.resize(1000, 700)
    _drop(tab, _file(tmp_path, "blue.png", BLUE))
    _ready(qtbot, tab.composer_box.tray)
    _send(desk, engine, tab, "What colour is it?")
    engine.write(engine.requests[-1], "It is mostly blue, with a thin diagonal line.", tokens=10)
    engine.end(engine.requests[-1])
    qtbot.waitUntil(lambda: tab.model.rowCount() == 2 and bool(tab.view.chip_boxes(0)))
    (sent, _box), = tab.view.chip_boxes(0)
    qtbot.waitUntil(lambda: desk.ctx.thumbnails.get(sent.target.sha256) is not None)
    _drop(tab, _file(tmp_path, "red.png", RED), _file(tmp_path, "cut.png", RED[: len(RED) // 2]))
    _paste(qtbot, tab, _screenshot_image("#2e7d32"))
    _ready(qtbot, tab.composer_box.tray, 3)
    qtbot.keyClicks(tab.composer, "And these?")
    qtbot.wait(100)  # the last layout pass
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert desk.window.grab().save(str(SCREENSHOTS / f"images-{theme}.png"))
