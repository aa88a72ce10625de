"""An image sent from the window to the real default model loaded with the tests' tiny
projector (tests/support/tiny_projector.py, as `chorus app --mmproj FILE`): the chip says
the model sees it, the engine encodes it once, the side panel shows its tokens, and a
second question about it encodes nothing (its cells come from the prefix cache). The
screenshots images-model-light.png / -dark.png show the side panel beside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from tests.inference.core.test_engine_images import RED
from tests.support.gui_app import SCREENSHOTS, App
from tests.support.tiny_projector import IMAGE_TOKENS, write_tiny_projector

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def projector(tmp_path_factory) -> Path:
    return write_tiny_projector(tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf")


@pytest.fixture
def vision_app(qtbot, data_dir, model_path, qt_asyncio, projector):
    instance = App(qtbot, data_dir, model_path, max_tokens=8, mmproj=projector)
    yield instance
    instance.close()


def _drop(widget, path: Path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    pos, actions, button = QPointF(widget.width() / 2, widget.height() / 2), Qt.DropAction.CopyAction, \
        Qt.MouseButton.LeftButton
    enter = QDragEnterEvent(pos.toPoint(), actions, mime, button, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, enter)
    assert enter.isAccepted()
    QApplication.sendEvent(widget, QDropEvent(pos, actions, mime, button, Qt.KeyboardModifier.NoModifier))


def _ask(app: App, tab, text: str) -> None:
    tab.composer.setFocus()
    app.qtbot.keyClicks(tab.composer, text)
    app.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    app.qtbot.waitUntil(lambda: tab.model.rowCount() >= 2 and app.last(tab).role == "assistant", timeout=10_000)
    app.wait_done(tab)


def _finished(app: App, count: int):
    app.qtbot.waitUntil(lambda: (m := app.ctx.engines.metrics) is not None and m.requests_finished >= count,
                        timeout=30_000)
    return app.ctx.engines.metrics


def test_an_image_is_encoded_once_and_a_second_question_encodes_nothing(vision_app, qtbot, tmp_path, theme):
    app = vision_app
    assert app.ctx.engines.sees_images(app.ctx.engines.engine)
    tab = app.new_tab()
    app.window.activateWindow()
    path = tmp_path / "red.png"
    path.write_bytes(RED)
    _drop(tab, path)
    tray = tab.composer_box.tray
    qtbot.waitUntil(lambda: len(tray.chips()) == 1 and not tray.extracting(), timeout=30_000)
    assert tray.chips()[0].details.text().splitlines()[-1] == "the model sees it"

    _ask(app, tab, "What is in this picture?")
    assert app.last(tab).status == "complete"
    first = _finished(app, 1)
    assert first.images_encoded == 1
    tab.panel_button.click()
    images = tab.panel.numbers["images"]
    qtbot.waitUntil(lambda: images.text() == f"{IMAGE_TOKENS} tokens, computed for this reply")

    _ask(app, tab, "What colour is it?")
    again = _finished(app, 2)
    assert again.images_encoded == 1  # the same image: not encoded again
    qtbot.waitUntil(lambda: images.text() == f"{IMAGE_TOKENS} tokens, reused from the cache")
    assert images.isVisible()

    (sent, _box), = tab.view.chip_boxes(0)
    qtbot.waitUntil(lambda: app.ctx.thumbnails.get(sent.target.sha256) is not None)
    _drop(tab, path)  # the composer with the image again, for the picture
    qtbot.waitUntil(lambda: len(tray.chips()) == 1 and not tray.extracting(), timeout=30_000)
    app.window.resize(1200, 760)
    qtbot.wait(100)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert app.window.grab().save(str(SCREENSHOTS / f"images-model-{theme}.png"))
