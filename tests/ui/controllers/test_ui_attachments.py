"""Files attached in the composer (issue 23): the paperclip's dialog, a drop on a chat tab or
the compare view, a paste; each file a chip that is read off the GUI thread (progress, ×
to cancel), then says what was read or why not; Send takes the ready ones with the text,
and a sent message's chip opens the document's text. Real files in tmp_path, the real
extraction and storage; a scripted engine answers (no model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QFileDialog

from storage import ChunkSpan, DocumentRepository, NewDocument, SourceRecord
from tests.support.desk import Desk, ScriptedEngine, as_remote
from tests.support.gui_app import SCREENSHOTS
from ui.widgets.chat.attachment_chips import ChipState

NOTES = "# Meeting notes\n\nThe launch moves to **March**. Ana owns the checklist.\n"


@pytest.fixture
def engine(engine: ScriptedEngine) -> ScriptedEngine:
    """The scripted engine as a server's (tests/support/desk.py)."""
    return as_remote(engine)


@pytest.fixture(autouse=True)
def active(desk, qtbot) -> None:
    """The window in front: only an active window has a focus widget to type into."""
    desk.window.activateWindow()
    qtbot.waitUntil(desk.window.isActiveWindow)


def _tab(desk: Desk, title: str = "attachments"):
    conv = desk.repo.create_conversation(title=title)
    desk.controllers.conversations.open_conversation(conv.id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    return desk.window.tab_for(conv.id)


def _notes(tmp_path: Path, name: str = "notes.md", text: str = NOTES) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _urls(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def _drop(widget, *paths: Path) -> None:
    """A drag of files entering widget and dropped there, as the window system sends them."""
    mime, pos = _urls(*paths), QPointF(widget.width() / 2, widget.height() / 2)
    actions, button = Qt.DropAction.CopyAction, Qt.MouseButton.LeftButton
    enter = QDragEnterEvent(pos.toPoint(), actions, mime, button, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, enter)
    assert enter.isAccepted()
    QApplication.sendEvent(widget, QDropEvent(pos, actions, mime, button, Qt.KeyboardModifier.NoModifier))


def _ready(qtbot, tray, count: int = 1):
    qtbot.waitUntil(lambda: len(tray.chips()) == count and not tray.extracting(), timeout=30_000)
    return tray.chips()


def _send(desk: Desk, engine: ScriptedEngine, tab, text: str) -> None:
    before = len(engine.requests)
    desk.qtbot.keyClicks(tab.composer, text)
    desk.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == before + 1)


def test_the_paperclip_attaches_a_file_which_goes_with_the_message(desk, engine, qtbot, tmp_path):
    tab = _tab(desk)
    path = _notes(tmp_path)
    qtbot.mouseClick(tab.composer_box.attach_button, Qt.MouseButton.LeftButton)
    dialog = tab.composer_box.file_dialog
    assert isinstance(dialog, QFileDialog) and dialog.isVisible()
    dialog.selectFile(str(path))  # as the menus' tests choose a file (the typed name's completer eats Enter)
    dialog.accept()
    qtbot.waitUntil(lambda: len(tab.composer_box.tray.chips()) == 1)
    (chip,) = _ready(qtbot, tab.composer_box.tray)
    assert chip.state is ChipState.READY and chip.name_label.text() == "notes.md"
    assert f"{len(chip.document.text):,} characters" in chip.details.text()
    assert chip.details.text().splitlines()[-1].startswith("≈")  # its tokens, guessed: a server's model
    assert "launch moves to" in chip.document.text

    _send(desk, engine, tab, "When is the launch?")
    assert tab.composer_box.tray.chips() == []  # the chips went with the message
    assert any("launch moves to" in m["content"] for m in engine.chats[0].messages)  # the model reads it
    path_ = desk.repo.active_path(tab.conversation_id)
    (attached,) = path_.attachments[path_.messages[0].id]
    assert attached.name == "notes.md" and attached.chars == len(chip.document.text)
    qtbot.waitUntil(lambda: tab.model.rowCount() == 2 and bool(tab.model.view(0).attachments))
    assert [a.name for a in tab.model.view(0).attachments] == ["notes.md"]


def test_a_pdf_dropped_on_the_tab_is_read_with_its_pages(desk, engine, qtbot, tmp_path):
    from tests.support.document_files import make_pdf

    tab = _tab(desk)
    pdf = make_pdf(tmp_path / "report.pdf", ["Revenue grew in the first quarter.", "Costs fell in the second."])
    _drop(tab, pdf)
    (chip,) = _ready(qtbot, tab.composer_box.tray)
    assert chip.state is ChipState.READY
    assert chip.details.text().startswith("2 pages · ")
    assert "characters" in chip.details.text()


def test_a_file_dropped_on_the_compare_view_goes_to_its_composer(desk, engine, qtbot, tmp_path):
    tab = _tab(desk)
    qtbot.keyClick(tab.composer, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: [len(c.panes()) for c in desk.window.open_comparisons()] == [2])
    compare = desk.window.open_comparisons()[0]
    _drop(compare, _notes(tmp_path))
    (chip,) = _ready(qtbot, compare.composer_box.tray)
    assert chip.state is ChipState.READY and "characters" in chip.details.text()
    assert tab.composer_box.tray.chips() == []  # not the chat tab's

    qtbot.keyClicks(compare.composer, "Who owns the checklist?")
    qtbot.keyClick(compare.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(engine.requests) == 2)  # one reply per pane
    assert compare.composer_box.tray.chips() == []
    for pane in compare.panes():
        stored = desk.repo.active_path(pane.conversation_id)
        assert [a.name for a in stored.attachments[stored.messages[0].id]] == ["notes.md"]
    pane = compare.panes()[0]
    qtbot.waitUntil(lambda: pane.model.rowCount() >= 1 and bool(pane.view.chip_boxes(0)))
    _click_chip(qtbot, pane, 0)
    viewer = desk.controllers.compare.viewer
    qtbot.waitUntil(lambda: viewer.dialog is not None and "Ana owns" in viewer.dialog.text.toPlainText())


def test_a_file_pasted_into_the_composer_is_attached_not_typed(desk, engine, qtbot, tmp_path):
    tab = _tab(desk)
    QApplication.clipboard().setMimeData(_urls(_notes(tmp_path, "pasted.txt", "Plain words to read.")))
    tab.composer.setFocus()
    qtbot.keyClick(tab.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    (chip,) = _ready(qtbot, tab.composer_box.tray)
    assert chip.document.text.strip() == "Plain words to read."
    assert tab.composer.toPlainText() == ""  # not its path as text


def test_a_file_that_cannot_be_read_holds_the_message_back_until_removed(desk, engine, qtbot, tmp_path):
    """Issue 39: a red chip once let Enter send the text alone, and the chips vanished."""
    tab = _tab(desk)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    _drop(tab, empty, _notes(tmp_path))
    failed, ready = _ready(qtbot, tab.composer_box.tray, 2)
    assert failed.state is ChipState.FAILED and ready.state is ChipState.READY
    assert "empty.txt" in failed.details.text() and failed.details.property("failed") is True

    qtbot.keyClicks(tab.composer, "Anything in them?")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    desk.settled()
    assert engine.requests == [] and desk.repo.active_path(tab.conversation_id).messages == []
    assert tab.composer.toPlainText() == "Anything in them?" and tab.composer_box.tray.chips() == [failed, ready]
    notice = tab.composer_box.notice
    assert notice.isVisible()
    assert notice.toolTip() == "Not sent: empty.txt could not be read. Remove it (×) to send without it."
    qtbot.mouseClick(tab.send_button, Qt.MouseButton.LeftButton)  # Send says the same, and keeps it all
    desk.settled()
    assert engine.requests == [] and tab.composer.toPlainText() == "Anything in them?"

    qtbot.mouseClick(failed.close_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not notice.isVisible())
    tab.composer.setFocus()
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(engine.requests) == 1)
    stored = desk.repo.active_path(tab.conversation_id)
    assert [a.name for a in stored.attachments[stored.messages[0].id]] == ["notes.md"]


def test_cancelling_a_file_being_read_removes_it(desk, engine, qtbot, tmp_path):
    from tests.support.document_files import make_pdf

    tab = _tab(desk)
    pdf = make_pdf(tmp_path / "long.pdf", [f"Page {i}: " + "words " * 200 for i in range(80)])
    _drop(tab, pdf)
    (chip,) = tab.composer_box.tray.chips()
    assert chip.state is ChipState.EXTRACTING and not tab.send_button.isEnabled()  # Send waits for it
    qtbot.mouseClick(chip.close_button, Qt.MouseButton.LeftButton)
    assert chip.cancel.is_set() and tab.composer_box.tray.chips() == []
    reading = desk.controllers.sending.reading.last
    qtbot.waitUntil(reading.done, timeout=30_000)
    qtbot.wait(50)  # the result's hop, if it came, must find no chip to fill
    assert tab.composer_box.tray.chips() == [] and tab.send_button.isEnabled()
    _send(desk, engine, tab, "Nothing attached.")
    desk.settled()
    assert desk.repo.active_path(tab.conversation_id).attachments == {}


def _click_chip(qtbot, tab, row: int, index: int = 0) -> None:
    _chip, box = tab.view.chip_boxes(row)[index]
    qtbot.mouseClick(tab.view.viewport(), Qt.MouseButton.LeftButton, pos=box.center())


def test_a_chip_on_a_sent_message_opens_the_document_text(desk, engine, qtbot, tmp_path):
    tab = _tab(desk)
    _drop(tab, _notes(tmp_path))
    _ready(qtbot, tab.composer_box.tray)
    _send(desk, engine, tab, "Summarise it.")
    qtbot.waitUntil(lambda: tab.model.rowCount() == 2 and bool(tab.view.chip_boxes(0)))
    (chip, box), = tab.view.chip_boxes(0)
    assert chip.text.startswith("notes.md · ") and "characters" in chip.text
    qtbot.mouseMove(tab.view.viewport(), box.center())
    qtbot.waitUntil(lambda: tab.view.viewport().cursor().shape() == Qt.CursorShape.PointingHandCursor)
    _click_chip(qtbot, tab, 0)
    viewer = desk.controllers.sending.viewer
    qtbot.waitUntil(lambda: viewer.dialog is not None and "launch moves to" in viewer.dialog.text.toPlainText())
    assert viewer.dialog.isVisible() and not viewer.dialog.isModal() and viewer.dialog.text.isReadOnly()
    assert "characters" in viewer.dialog.details.text()


def test_a_reply_s_citations_are_chips_that_open_their_excerpt(desk, engine, qtbot):
    text = "Intro page.\n\nThe budget is 40 euros.\n"
    doc = NewDocument("a" * 64, "budget.pdf", "application/pdf", 900, text, 2,
                      (ChunkSpan(0, 11, page=1), ChunkSpan(13, len(text), page=2)))
    conv = desk.repo.create_conversation(title="cited")
    question = desk.repo.add_message(conv.id, "user", "What is the budget?", documents=(doc,))
    reply = desk.repo.add_message(conv.id, "assistant", "It is 40 euros [2].", parent_id=question.id)
    documents = DocumentRepository(desk.db)
    documents.set_sources(reply.id, (SourceRecord(1, doc.sha256, doc.name, 0, 1, False),
                                     SourceRecord(2, doc.sha256, doc.name, 1, 2, True)))
    desk.controllers.conversations.open_conversation(conv.id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    tab = desk.window.tab_for(conv.id)
    qtbot.waitUntil(lambda: tab.model.rowCount() == 2 and len(tab.view.chip_boxes(1)) == 2)
    chips = [chip for chip, _box in tab.view.chip_boxes(1)]
    assert [c.text for c in chips] == ["[1] budget.pdf p.1", "[2] budget.pdf p.2"]
    assert [c.emphasized for c in chips] == [False, True]  # the one the reply cites
    _click_chip(qtbot, tab, 1, index=1)
    viewer = desk.controllers.sending.viewer
    qtbot.waitUntil(lambda: viewer.dialog is not None and bool(viewer.dialog.text.toPlainText()))
    assert viewer.dialog.text.toPlainText() == "The budget is 40 euros.\n"
    assert "page 2" in viewer.dialog.details.text() and "cited" in viewer.dialog.details.text()


def test_the_composer_box_toggles_send_and_stop(desk, engine, qtbot):
    tab = _tab(desk)
    assert tab.send_button.isVisible() and not tab.stop_button.isVisible()
    assert tab.composer_box.isAncestorOf(tab.send_button) and tab.composer_box.isAncestorOf(tab.composer)
    _send(desk, engine, tab, "Hello")
    qtbot.waitUntil(lambda: tab.stop_button.isVisible() and tab.stop_button.isEnabled())
    assert not tab.send_button.isVisible()
    stop_at = tab.stop_button.mapTo(tab, QPoint(0, 0))
    engine.end(engine.requests[-1])  # the reply ends by itself (no click to lay the box out again)
    qtbot.waitUntil(lambda: tab.send_button.isVisible() and tab.send_button.isEnabled())
    assert tab.send_button.mapTo(tab, QPoint(0, 0)) == stop_at  # the same place in the box, at once


def test_screenshot_of_attachments_in_a_chat(desk, engine, qtbot, tmp_path, theme):
    """A question with two documents, a reply citing them, and the composer holding a file
    read, one being read and one that failed, Enter pressed: the line saying why it waits."""
    from tests.support.document_files import make_pdf

    desk.window.resize(1000, 680)
    text = "Quarterly report.\n\nRevenue grew 12% in the first quarter.\n\nCosts fell 3% in the second.\n"
    report = NewDocument("b" * 64, "q1-report.pdf", "application/pdf", 48_200, text, 3,
                         (ChunkSpan(0, 17, page=1), ChunkSpan(19, 58, page=2), ChunkSpan(60, len(text), page=3)))
    notes = NewDocument("c" * 64, "meeting-notes.md", "text/markdown", 1_250, NOTES, None, (ChunkSpan(0, len(NOTES)),))
    conv = desk.repo.create_conversation(title="Quarterly numbers")
    question = desk.repo.add_message(conv.id, "user", "How did revenue and costs move this year?",
                                     documents=(report, notes))
    reply = desk.repo.add_message(conv.id, "assistant",
                                  "Revenue grew **12%** in the first quarter [2], and costs fell 3% in the second [3].",
                                  parent_id=question.id)
    DocumentRepository(desk.db).set_sources(reply.id, (
        SourceRecord(1, report.sha256, report.name, 0, 1, False, where="Summary"),
        SourceRecord(2, report.sha256, report.name, 1, 2, True, where="Results › Revenue"),
        SourceRecord(3, report.sha256, report.name, 2, 3, True, where="Results › Costs")))
    desk.controllers.conversations.refresh()
    desk.controllers.conversations.open_conversation(conv.id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    tab = desk.window.tab_for(conv.id)
    qtbot.waitUntil(lambda: tab.model.rowCount() == 2 and len(tab.view.chip_boxes(1)) == 3)
    tray = tab.composer_box.tray
    _drop(tab, make_pdf(tmp_path / "budget-2027.pdf", ["Budget.", "Travel: 4,000 euros."]))
    empty = tmp_path / "scan.txt"
    empty.write_bytes(b"")
    _drop(tab, empty)
    _ready(qtbot, tray, 2)
    tray.blockSignals(True)  # no reading: this chip stays "reading…" for the picture
    (reading,) = tray.add_files([tmp_path / "contract-draft.docx"])
    tray.blockSignals(False)
    reading.set_progress(0.45)
    tray.changed.emit()
    tab.composer.setFocus()
    qtbot.keyClicks(tab.composer, "Compare these with the new budget")
    qtbot.waitUntil(lambda: all(c.isVisible() for c in tray.chips()))
    qtbot.wait(50)  # the layout of the chips settles before the grab
    assert [c.state for c in tray.chips()] == [ChipState.READY, ChipState.FAILED, ChipState.EXTRACTING]
    assert not tab.send_button.isEnabled()  # a file is still being read
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(tab.composer_box.notice.isVisible)
    assert tab.composer_box.notice.text().startswith("Not sent: scan.txt could not be read.")
    qtbot.wait(50)  # the box grown by the line, laid out before the grab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert desk.window.grab().save(str(SCREENSHOTS / f"attachments-{theme}.png"))


@pytest.mark.model
def test_a_file_dropped_and_sent_is_answered_by_the_real_model(app, tmp_path):
    """End to end on the default model: the drop, the chip, the send, a whole reply, and the
    question's chip on screen and in storage."""
    tab = app.new_tab()
    _drop(tab, _notes(tmp_path))
    _ready(app.qtbot, tab.composer_box.tray)
    app.send(tab, "Who owns the checklist?")
    app.wait_done(tab)
    assert app.last(tab).status == "complete" and app.last(tab).text
    stored = app.repo.active_path(tab.conversation_id)
    question = next(m for m in stored.messages if m.role == "user")
    assert [a.name for a in stored.attachments[question.id]] == ["notes.md"]
    row = next(r for r in range(tab.model.rowCount()) if tab.model.view(r).role == "user")
    assert [chip.text.split(" · ")[0] for chip, _box in tab.view.chip_boxes(row)] == ["notes.md"]
