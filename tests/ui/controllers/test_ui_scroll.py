"""The chat view keeps the newest message in sight (issue 27, defect 5): after Save prompt
and the next exchange, in a chat reopened while it writes, with Details opened and closed;
unless the user scrolled up, and then "Jump to latest" brings it back. No model: a
scripted engine answers."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from inference.outputs import FinishReason
from tests.support.desk import Desk, ScriptedEngine

LONG = " ".join(["A paragraph long enough to wrap over a few lines of the chat view."] * 4)


def _long_chat(desk: Desk, turns: int = 12):
    """A stored chat several screens long, open in its tab."""
    conv = desk.repo.create_conversation(title="long")
    parent = None
    for i in range(turns):
        parent = desk.repo.add_message(conv.id, "user", f"Question {i}?", parent_id=parent).id
        parent = desk.repo.add_message(conv.id, "assistant", f"Answer {i}. {LONG}", parent_id=parent).id
    desk.controllers.conversations.open_conversation(conv.id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    tab = desk.window.tab_for(conv.id)
    desk.qtbot.waitUntil(lambda: tab.model.rowCount() == 2 * turns)
    return tab


def _shows_the_end(qtbot, tab) -> None:
    def at_end() -> None:
        bar = tab.view.verticalScrollBar()
        assert bar.maximum() > 0 and bar.value() == bar.maximum(), (bar.value(), bar.maximum())

    qtbot.waitUntil(at_end)


def _send(desk: Desk, engine: ScriptedEngine, tab, text: str) -> str:
    before = len(engine.requests)
    desk.qtbot.keyClicks(tab.composer, text)
    desk.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == before + 1)
    return engine.requests[-1]


def _wheel_up(view, notches: int = 3) -> None:
    """The mouse wheel turned towards the start over the messages."""
    centre = QPointF(view.viewport().rect().center())
    event = QWheelEvent(centre, QPointF(view.viewport().mapToGlobal(centre.toPoint())), QPoint(0, 0),
                        QPoint(0, 120 * notches), Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                        Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(view.viewport(), event)


def test_a_long_chat_opens_at_its_end(desk, qtbot):
    _shows_the_end(qtbot, _long_chat(desk))


def test_after_save_prompt_the_next_exchange_is_in_sight(desk, engine, qtbot):
    tab = _long_chat(desk)
    _shows_the_end(qtbot, tab)
    tab.panel_button.click()
    tab.panel.system_edit.setPlainText("You answer briefly.")
    tab.panel.save_prompt_button.click()
    qtbot.waitUntil(lambda: tab.model.view(0).role == "system")
    _shows_the_end(qtbot, tab)
    request = _send(desk, engine, tab, "One more?")
    for _ in range(30):
        engine.write(request, "more words and ")
    engine.end(request, FinishReason.STOP)
    qtbot.waitUntil(lambda: tab.send_button.isEnabled())
    _shows_the_end(qtbot, tab)


def test_a_chat_reopened_while_it_writes_opens_at_its_end(desk, engine, qtbot):
    tab = _long_chat(desk)
    conv_id = tab.conversation_id
    request = _send(desk, engine, tab, "Write a lot.")
    engine.write(request, LONG)
    desk.window.close_tab_of(conv_id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv_id) is None)
    desk.window.open_requested.emit(conv_id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv_id) is not None)
    tab = desk.window.tab_for(conv_id)
    _shows_the_end(qtbot, tab)
    engine.write(request, LONG)
    _shows_the_end(qtbot, tab)


def test_details_opened_and_closed_keep_the_end_in_sight(desk, qtbot):
    tab = _long_chat(desk)
    _shows_the_end(qtbot, tab)
    tab.panel_button.click()
    qtbot.waitUntil(tab.panel_area.isVisible)
    _shows_the_end(qtbot, tab)
    tab.panel_button.click()
    qtbot.waitUntil(lambda: not tab.panel_area.isVisible())
    _shows_the_end(qtbot, tab)


def test_scrolled_up_the_view_stays_and_jump_to_latest_follows_again(desk, engine, qtbot):
    tab = _long_chat(desk)
    _shows_the_end(qtbot, tab)
    request = _send(desk, engine, tab, "Write a lot.")
    bar = tab.view.verticalScrollBar()
    _wheel_up(tab.view)  # the user goes back to read
    qtbot.waitUntil(lambda: bar.value() < bar.maximum() - 100)
    kept = bar.value()
    engine.write(request, LONG)
    qtbot.waitUntil(tab.view.jump_button.isVisible)
    assert bar.value() == kept
    qtbot.mouseClick(tab.view.jump_button, Qt.MouseButton.LeftButton)
    _shows_the_end(qtbot, tab)
    assert not tab.view.jump_button.isVisible()
    engine.write(request, LONG)
    _shows_the_end(qtbot, tab)
