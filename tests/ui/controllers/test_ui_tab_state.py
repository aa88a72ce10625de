"""The front tab's state line says what the engine does for its chat (issue 39, defect 7):
restoring its prefix from the disk cache, reading the prompt, writing; never "queued
(position 0)". No model: a scripted engine sends the engine's phases."""

from __future__ import annotations

from PySide6.QtCore import Qt

from inference.outputs import Delta, Phase
from tests.support.desk import Desk, ScriptedEngine


def _sent(desk: Desk, engine: ScriptedEngine, qtbot):
    conv = desk.repo.create_conversation(title="state")
    desk.controllers.conversations.open_conversation(conv.id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    tab = desk.window.tab_for(conv.id)
    qtbot.keyClicks(tab.composer, "Hello.")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: bool(engine.replies()))
    return tab, engine.replies()[-1]


def test_the_state_line_follows_the_engine_from_restoring_to_writing(desk, engine, qtbot):
    tab, request = _sent(desk, engine, qtbot)
    sink = engine.sinks[request]
    sink(Delta(request, phase=Phase.RESTORING, progress=(0, 890)))
    qtbot.waitUntil(lambda: tab.state_label.text() == "restoring from cache…")
    sink(Delta(request, phase=Phase.PREFILLING, progress=(445, 890)))
    qtbot.waitUntil(lambda: tab.state_label.text() == "reading the prompt (50%)")
    engine.write(request, "Hi", tokens=1)
    qtbot.waitUntil(lambda: tab.state_label.text().startswith("writing…"))


def test_a_request_in_no_queue_is_not_at_position_0(desk, engine, qtbot):
    tab, request = _sent(desk, engine, qtbot)
    engine.sinks[request](Delta(request, phase=Phase.QUEUED, progress=(2, 12)))
    qtbot.waitUntil(lambda: tab.state_label.text() == "queued (position 2)")
    engine.sinks[request](Delta(request, phase=Phase.QUEUED, progress=(0, 12)))
    qtbot.waitUntil(lambda: tab.state_label.text() == "queued")


def test_a_chat_queued_again_while_hidden_is_queued_in_its_bubble_when_shown(desk, engine, qtbot):
    """Its bubble said "writing…" while its state line said "queued": a tab brought to the
    front drew its backlog as writing whatever the engine last said of it."""
    tab, request = _sent(desk, engine, qtbot)
    engine.write(request, "one ", tokens=1)
    qtbot.waitUntil(lambda: tab.state_label.text().startswith("writing…"))
    other, _ = _sent(desk, engine, qtbot)  # a second chat, now in front
    qtbot.waitUntil(lambda: desk.window.tabs.currentWidget() is other)
    engine.write(request, "two ", tokens=1)
    engine.sinks[request](Delta(request, phase=Phase.QUEUED, progress=(1, 12)))  # preempted
    qtbot.waitUntil(lambda: tab.state_label.text() == "queued (position 1)")
    qtbot.keyClick(desk.window.tabs.currentWidget().composer, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: desk.window.tabs.currentWidget() is tab)
    qtbot.waitUntil(lambda: tab.model.view(tab.model.rowCount() - 1).text.endswith("two "))
    assert tab.model.view(tab.model.rowCount() - 1).status == "queued"
    assert tab.state_label.text() == "queued (position 1)"
