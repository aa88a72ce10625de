"""What the window keeps over a restart beyond its tabs (issue 27, defect 10): the unread
marks, the preset chosen for new chats and the text typed in a composer but not sent, with
the files attached to it (issue 39: they are read again, and a file gone says so). The
restart is a second Desk on the same data folder; no model."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, QUrl
from PySide6.QtWidgets import QApplication

from tests.support.desk import Desk, as_remote, scripted_engine
from ui.services.window_state import WINDOW_SETTING
from ui.widgets.chat.attachment_chips import ChipState


def _text(window, widget) -> str:
    return window.tabs.tabText(window.tabs.indexOf(widget))


def _drafts(desk: Desk) -> dict:
    saved = desk.ctx.storage.submit(desk.ctx.catalog.get_setting, WINDOW_SETTING).result() or {}
    return {int(ident): text for ident, text, *_files in saved.get("drafts", [])}


def test_marks_the_preset_and_unsent_text_are_back_after_a_restart(desk, qtbot, tmp_path):
    w = desk.window
    desk.ctx.catalog.create_preset("Terse", "Answer in one line.")
    desk.controllers.presets.refresh()
    qtbot.waitUntil(lambda: w.preset_box.count() == 2)
    qtbot.keyClick(w.preset_box, Qt.Key.Key_Down)  # "No preset" -> "Terse"
    assert w.preset_box.currentText() == "Terse"

    back = desk.open_chat("Lighthouses")
    front = desk.open_chat("Rivers")  # in front
    writes: list[str] = []
    set_setting = desk.ctx.catalog.set_setting
    desk.ctx.catalog.set_setting = lambda key, value: (writes.append(key), set_setting(key, value))[1]
    qtbot.keyClicks(front.composer, "half a thought")
    # Saved once the typing pauses, not with every key.
    qtbot.waitUntil(lambda: _drafts(desk).get(front.conversation_id) == "half a thought", timeout=3000)
    assert writes.count(WINDOW_SETTING) == 1

    stream = desk.stream(back.conversation_id)
    desk.token(stream)
    desk.finish(stream)
    qtbot.waitUntil(lambda: _text(w, back) == "✓ Lighthouses")
    desk.controllers.window_state.save()  # as the app's shutdown does
    desk.settled()

    again = Desk(qtbot, tmp_path)  # the next start, on the same data
    try:
        aw = again.window
        again.controllers.conversations.refresh()
        again.controllers.presets.refresh()
        again.controllers.window_state.restore()
        qtbot.waitUntil(lambda: aw.tab_for(front.conversation_id) is not None
                        and aw.tab_for(front.conversation_id).composer.toPlainText() == "half a thought")
        assert aw.tabs.currentWidget() is aw.tab_for(front.conversation_id)
        reopened = aw.tab_for(back.conversation_id)
        qtbot.waitUntil(lambda: _text(aw, reopened) == "✓ Lighthouses")
        assert aw.preset_box.currentText() == "Terse"
        aw.tabs.setCurrentWidget(reopened)  # looked at: the mark goes, as before the restart
        qtbot.waitUntil(lambda: _text(aw, reopened) == "Lighthouses")
    finally:
        again.close()


def _paste_files(qtbot, tab, *paths) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    QApplication.clipboard().setMimeData(mime)
    tab.composer.setFocus()
    qtbot.keyClick(tab.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)


def _read(qtbot, tab, count: int):
    tray = tab.composer_box.tray
    qtbot.waitUntil(lambda: len(tray.chips()) == count and not tray.extracting(), timeout=30_000)
    return tray.chips()


def test_a_draft_s_files_come_back_with_its_text_and_one_gone_says_so(desk, qtbot, tmp_path):
    desk.window.activateWindow()
    qtbot.waitUntil(desk.window.isActiveWindow)
    notes, plan = tmp_path / "notes.md", tmp_path / "plan.txt"
    notes.write_text("# Notes\n\nThe launch moves to March.\n", encoding="utf-8")
    plan.write_text("Ana owns the checklist.", encoding="utf-8")
    tab = desk.open_chat("Launch")
    _paste_files(qtbot, tab, notes, plan)
    _read(qtbot, tab, 2)
    qtbot.keyClicks(tab.composer, "Who owns what?")
    desk.controllers.window_state.save()  # as the app's shutdown does
    desk.settled()
    plan.unlink()  # gone before the next start

    again = Desk(qtbot, tmp_path)
    engine = as_remote(scripted_engine(again))
    try:
        again.window.activateWindow()
        again.controllers.window_state.restore()
        qtbot.waitUntil(lambda: again.window.tab_for(tab.conversation_id) is not None)
        back = again.window.tab_for(tab.conversation_id)
        kept, gone = _read(qtbot, back, 2)
        assert back.composer.toPlainText() == "Who owns what?"
        assert (kept.path, kept.state) == (notes, ChipState.READY)
        assert (gone.path, gone.state) == (plan, ChipState.FAILED)
        assert gone.details.whole == "plan.txt does not exist (moved or deleted?)"  # elided on the chip

        back.composer.setFocus()
        qtbot.keyClick(back.composer, Qt.Key.Key_Return)  # not sent without it, silently
        qtbot.waitUntil(back.composer_box.notice.isVisible)
        assert back.composer.toPlainText() == "Who owns what?" and engine.requests == []
        qtbot.mouseClick(gone.close_button, Qt.MouseButton.LeftButton)
        qtbot.keyClick(back.composer, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: len(engine.requests) == 1)
        stored = again.repo.active_path(back.conversation_id)
        assert [a.name for a in stored.attachments[stored.messages[0].id]] == ["notes.md"]
    finally:
        again.close()


def test_a_pasted_image_in_a_draft_comes_back_after_a_restart(desk, qtbot, tmp_path):
    """Issue 36's leftover: a screenshot pasted with Ctrl+V (no file of its own) was lost with
    the draft's restart while its text came back. It is kept as a private PNG file under the
    data folder's drafts/, read again like any file, and removed once nothing refers to it."""
    from PySide6.QtGui import QColor, QImage

    desk.window.activateWindow()
    qtbot.waitUntil(desk.window.isActiveWindow)
    tab = desk.open_chat("Screenshot")
    image = QImage(64, 40, QImage.Format.Format_RGB32)
    image.fill(QColor("#2060c0"))
    QApplication.clipboard().setImage(image)
    tab.composer.setFocus()
    qtbot.keyClick(tab.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    (pasted,) = _read(qtbot, tab, 1)
    qtbot.keyClicks(tab.composer, "What is on it?")
    desk.controllers.window_state.save().result(10)  # as the app's shutdown does
    desk.settled()
    kept = tmp_path / "drafts" / str(tab.conversation_id) / "pasted image 1.png"
    assert kept.read_bytes() == pasted.document.data and kept.stat().st_mode & 0o077 == 0

    again = Desk(qtbot, tmp_path)
    try:
        again.window.activateWindow()
        again.controllers.window_state.restore()
        qtbot.waitUntil(lambda: again.window.tab_for(tab.conversation_id) is not None)
        back = again.window.tab_for(tab.conversation_id)
        (chip,) = _read(qtbot, back, 1)
        assert back.composer.toPlainText() == "What is on it?"
        assert (chip.name_label.text(), chip.state) == ("pasted image 1.png", ChipState.READY)
        assert QImage.fromData(chip.document.data).pixelColor(5, 5).name() == "#2060c0"
        again.controllers.window_state.save().result(10)  # the restored chip is a file now: kept
        assert kept.is_file()
        qtbot.mouseClick(chip.close_button, Qt.MouseButton.LeftButton)
        again.controllers.window_state.save().result(10)  # no draft refers to it: removed
        assert not kept.exists() and not kept.parent.exists()
    finally:
        again.close()
