"""What the window keeps over a restart beyond its tabs (issue 27, defect 10): the unread
marks, the preset chosen for new chats and the text typed in a composer but not sent. The
restart is a second Desk on the same data folder; no model."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.support.desk import Desk
from ui.services.window_state import WINDOW_SETTING


def _text(window, widget) -> str:
    return window.tabs.tabText(window.tabs.indexOf(widget))


def _drafts(desk: Desk) -> dict:
    saved = desk.ctx.storage.submit(desk.ctx.catalog.get_setting, WINDOW_SETTING).result() or {}
    return {int(ident): text for ident, text in saved.get("drafts", [])}


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
