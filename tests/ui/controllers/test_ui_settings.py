"""File → Settings (issue 27): the defaults of every chat, opened with Ctrl+, on the window,
used by the next reply and kept for the next start. No model: a scripted engine answers."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from app.chats.defaults import ChatDefaults
from inference import UNLIMITED
from tests.support.desk import Desk, scripted_engine
from ui.widgets.settings.reply_length import UNTIL_STOP_TEXT


@pytest.fixture(autouse=True)
def active(desk, qtbot) -> None:
    desk.window.activateWindow()
    qtbot.waitUntil(desk.window.isActiveWindow)


def _send(desk: Desk, engine, text: str):
    conv = desk.repo.create_conversation(title="settings")
    desk.controllers.conversations.open_conversation(conv.id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    tab = desk.window.tab_for(conv.id)
    before = len(engine.chats)
    desk.qtbot.keyClicks(tab.composer, text)
    desk.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    desk.qtbot.waitUntil(lambda: len(engine.chats) == before + 1)
    return engine.chats[-1]


def test_a_new_chat_s_reply_is_not_cut_at_512_tokens(desk, engine):
    chat = _send(desk, engine, "Write a long story.")
    assert chat.sampling.max_tokens == UNLIMITED  # was 512
    assert chat.overflow == "drop_oldest"


def test_settings_opened_with_ctrl_comma_apply_to_the_next_reply_and_are_kept(desk, engine, qtbot, tmp_path):
    qtbot.keyClick(desk.window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: desk.controllers.settings.window is not None
                    and desk.controllers.settings.window.isVisible())
    settings = desk.controllers.settings.window
    assert settings.reply_length.text() == UNTIL_STOP_TEXT
    settings.spins["temperature"].setValue(0.25)
    settings.reply_length.setValue(300)
    settings.overflow.setCurrentIndex(settings.overflow.findData("truncate_middle"))
    buttons = settings.findChild(QDialogButtonBox)
    qtbot.mouseClick(buttons.button(QDialogButtonBox.StandardButton.Save), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not settings.isVisible())
    chat = _send(desk, engine, "Hello")
    assert (chat.sampling.temperature, chat.sampling.max_tokens, chat.overflow) == (0.25, 300, "truncate_middle")
    desk.settled()

    again = Desk(qtbot, tmp_path)  # the next start, on the same data
    try:
        again.controllers.settings.restore()
        qtbot.waitUntil(lambda: again.ctx.chat_defaults != ChatDefaults())
        assert again.ctx.chat_defaults.overflow == "truncate_middle"
        assert (again.ctx.sampling.temperature, again.ctx.sampling.max_tokens) == (0.25, 300)
        chat = _send(again, scripted_engine(again), "Hi again")
        assert (chat.sampling.temperature, chat.overflow) == (0.25, "truncate_middle")
    finally:
        again.close()


def test_a_chat_s_own_length_until_the_model_stops_is_kept_as_unlimited(desk, engine, qtbot):
    """The side panel's Max tokens at its lowest reads "Until the model stops" and saves
    UNLIMITED (its range began at 1, so a chat could not ask for it)."""
    conv = desk.repo.create_conversation(title="own")
    desk.controllers.conversations.open_conversation(conv.id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    panel = desk.window.tab_for(conv.id).panel
    panel.reply_length.setValue(0)
    assert panel.reply_length.text() == UNTIL_STOP_TEXT
    assert panel.sampling()["max_tokens"] == UNLIMITED


def test_screenshot_of_the_settings_window(desk, qtbot, theme):
    from tests.support.gui_app import SCREENSHOTS

    qtbot.keyClick(desk.window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: desk.controllers.settings.window is not None
                    and desk.controllers.settings.window.isVisible())
    settings = desk.controllers.settings.window
    qtbot.waitExposed(settings)
    assert settings.width() >= settings.sizeHint().width()  # nothing cut at its opening size
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert settings.grab().save(str(SCREENSHOTS / f"settings-window-{theme}.png"))
