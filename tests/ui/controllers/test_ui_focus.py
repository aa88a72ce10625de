"""The keyboard focus stays where the user types (issue 27, defect 4): after Stop,
Regenerate and Continue are clicked, and when a comparison opens, the next keys go to a
composer, not to the sidebar's search box. No model: a scripted engine answers."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from inference.outputs import FinishReason
from tests.support.desk import Desk, ScriptedEngine


@pytest.fixture(autouse=True)
def active(desk, qtbot) -> None:
    """The window in front, as the user's is: only an active window has a focus widget."""
    desk.window.activateWindow()
    qtbot.waitUntil(desk.window.isActiveWindow)


def _chat_with_a_reply(desk: Desk, engine: ScriptedEngine, reason: FinishReason = FinishReason.STOP):
    """A tab whose question got an answer, sent from the keyboard."""
    conv = desk.repo.create_conversation(title="focus")
    desk.controllers.conversations.open_conversation(conv.id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    tab = desk.window.tab_for(conv.id)
    desk.qtbot.keyClicks(tab.composer, "Which sort is stable?")
    desk.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 1)
    engine.write(engine.requests[-1])
    engine.end(engine.requests[-1], reason)
    desk.qtbot.waitUntil(lambda: tab.send_button.isEnabled())
    return tab


def _typing_goes_to(qtbot, widget) -> None:
    def focused() -> None:
        assert QApplication.focusWidget() is widget, f"the keys go to {QApplication.focusWidget()!r}"

    qtbot.waitUntil(focused)


def test_stop_clicked_leaves_the_focus_in_the_composer(desk, engine, qtbot):
    tab = _chat_with_a_reply(desk, engine)
    tab.regenerate_button.click()
    qtbot.waitUntil(lambda: len(engine.requests) == 2 and tab.stop_button.isEnabled())
    qtbot.mouseClick(tab.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not tab.stop_button.isEnabled())
    _typing_goes_to(qtbot, tab.composer)


def test_regenerate_clicked_leaves_the_focus_in_the_composer(desk, engine, qtbot):
    tab = _chat_with_a_reply(desk, engine)
    qtbot.mouseClick(tab.regenerate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(engine.requests) == 2)
    _typing_goes_to(qtbot, tab.composer)
    engine.end(engine.requests[-1])
    qtbot.waitUntil(lambda: tab.regenerate_button.isEnabled())
    _typing_goes_to(qtbot, tab.composer)


def test_continue_clicked_leaves_the_focus_in_the_composer(desk, engine, qtbot):
    tab = _chat_with_a_reply(desk, engine, FinishReason.LENGTH)
    tab.panel_button.click()
    qtbot.waitUntil(lambda: tab.panel.continue_button.isVisible() and tab.panel.continue_button.isEnabled())
    qtbot.mouseClick(tab.panel.continue_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(engine.requests) == 2)
    _typing_goes_to(qtbot, tab.composer)


def test_a_comparison_opened_from_the_keyboard_takes_the_typing(desk, engine, qtbot):
    tab = _chat_with_a_reply(desk, engine)
    qtbot.keyClick(tab.composer, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: [len(c.panes()) for c in desk.window.open_comparisons()] == [2])
    _typing_goes_to(qtbot, desk.window.open_comparisons()[0].composer)
