"""Nothing kept of what was never sent (issue 39, defect 4): a chat opened with Ctrl+N and
left without a message is no row of the sidebar or of an export, is gone from storage once
its tab closes (or at the next start, when its tab was left empty), and a reply stopped
before its first token leaves no blank bubble: the question stays, to be asked again. The
window as the composition root builds it, keys pressed on it; no model (a scripted engine)."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt

from app.chats.export_import import export_text
from tests.support.desk import Desk, scripted_engine

CTRL = Qt.KeyboardModifier.ControlModifier


def _new_chat(desk: Desk):
    before = desk.window.tabs.count()
    desk.qtbot.keyClick(desk.window, Qt.Key.Key_N, CTRL)
    desk.qtbot.waitUntil(lambda: desk.window.tabs.count() == before + 1)
    return desk.window.tabs.currentWidget()


def _ask(desk: Desk, tab, text: str) -> None:
    tab.composer.setFocus()
    desk.qtbot.keyClicks(tab.composer, text)
    desk.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)


def _stored_ids(desk: Desk) -> set[int]:
    return {c.id for c in desk.repo.list_conversations(include_archived=True)}


def _sidebar_after_refresh(desk: Desk) -> list[str]:
    desk.controllers.conversations.refresh()
    desk.settled()
    return desk.window.conversation_list.titles()


def test_chats_opened_with_ctrl_n_and_never_used_are_not_listed_exported_or_kept(desk, qtbot):
    engine = scripted_engine(desk)
    kept = desk.open_chat("Lighthouses")  # a chat of before, with a message
    desk.repo.add_message(kept.conversation_id, "user", "Why are they striped?")
    empties = [_new_chat(desk) for _ in range(3)]
    ids = [t.conversation_id for t in empties]
    assert set(ids) <= _stored_ids(desk), "an open tab's chat has its row (its id)"

    assert _sidebar_after_refresh(desk) == ["Lighthouses"], "no 'New chat' rows"
    exported = json.loads(export_text(desk.db, desk.repo, "json")[0])
    assert [c["title"] for c in exported["conversations"]] == ["Lighthouses"]

    for _ in range(2):  # Ctrl+W on the two in front: their rows go with them
        qtbot.keyClick(desk.window, Qt.Key.Key_W, CTRL)
    qtbot.waitUntil(lambda: desk.window.tabs.count() == 2)
    desk.settled()
    assert not set(ids[1:]) & _stored_ids(desk)

    used = empties[0]
    desk.window.tabs.setCurrentWidget(used)
    _ask(desk, used, "What is a fresnel lens?")
    qtbot.waitUntil(lambda: len(engine.replies()) == 1)
    engine.write(engine.replies()[0], "A lens of rings.")
    engine.end(engine.replies()[0])
    qtbot.waitUntil(lambda: not used.busy)
    qtbot.waitUntil(lambda: "What is a fresnel lens?" in _sidebar_after_refresh(desk))
    qtbot.keyClick(desk.window, Qt.Key.Key_W, CTRL)  # used: closing it keeps it
    qtbot.waitUntil(lambda: desk.window.tabs.count() == 1)
    desk.settled()
    assert used.conversation_id in _stored_ids(desk)


def test_an_empty_tab_left_at_quit_is_gone_at_the_next_start_but_one_with_a_draft_stays(desk, qtbot, tmp_path):
    left = _new_chat(desk)
    drafted = _new_chat(desk)
    qtbot.keyClicks(drafted.composer, "half a question")
    desk.controllers.window_state.save()  # as the app's shutdown does
    desk.settled()

    again = Desk(qtbot, tmp_path)  # the next start, on the same data
    try:
        again.controllers.window_state.restore()
        qtbot.waitUntil(lambda: again.window.tab_for(drafted.conversation_id) is not None)
        again.settled()
        assert again.window.tab_for(drafted.conversation_id).composer.toPlainText() == "half a question"
        assert again.window.tab_for(left.conversation_id) is None
        assert left.conversation_id not in _stored_ids(again)
    finally:
        again.close()


def test_a_reply_stopped_before_its_first_token_leaves_no_blank_bubble(desk, qtbot):
    engine = scripted_engine(desk)
    tab = _new_chat(desk)
    _ask(desk, tab, "Tell me a long story")
    qtbot.waitUntil(lambda: len(engine.replies()) == 1)
    qtbot.waitUntil(lambda: tab.stop_button.isVisible())
    qtbot.keyClick(desk.window, Qt.Key.Key_Escape)  # Stop, before any token came
    qtbot.waitUntil(lambda: not tab.busy)
    qtbot.waitUntil(lambda: [v.role for v in tab.model.views()] == ["user"])
    desk.settled()
    stored = desk.repo.active_path(tab.conversation_id).messages
    assert [(m.role, m.content) for m in stored] == [("user", "Tell me a long story")]
    assert tab.regenerate_button.isEnabled(), "the question can be asked again"

    tab.regenerate_button.click()  # asked again, then stopped after a word: that reply stays
    qtbot.waitUntil(lambda: len(engine.replies()) == 2)
    engine.write(engine.replies()[1], "Once")
    qtbot.waitUntil(lambda: tab.model.views()[-1].text == "Once")
    qtbot.keyClick(desk.window, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not tab.busy)
    desk.settled()
    stored = desk.repo.active_path(tab.conversation_id).messages
    assert [(m.role, m.content, m.status.value) for m in stored][-1] == ("assistant", "Once", "stopped")
    assert [v.role for v in tab.model.views()] == ["user", "assistant"]
