"""Streaming into views that come and go: a chat reopened while it writes shows every
token, and one chat never streams two replies at once (the desktop issue's defects 1, 2)."""

from __future__ import annotations

import pytest

from inference import SamplingParams
from storage import MessageStatus
from tests.support.gui_app import App

pytestmark = pytest.mark.model


@pytest.fixture
def app(qtbot, tmp_path, model_path):
    instance = App(qtbot, tmp_path, model_path)
    instance.ctx.sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=300, ignore_eos=True)
    yield instance
    instance.close()


def _writing_with_text(app, tab) -> None:
    """Until the reply has text on screen and is still being written, past a checkpoint."""
    app.qtbot.waitUntil(lambda: tab.model.rowCount() >= 2 and len(app.last(tab).text) > 40, timeout=120_000)

    def stored() -> str:
        return app.repo.active_path(tab.conversation_id).messages[-1].content

    app.qtbot.waitUntil(lambda: stored() != "", timeout=10_000)  # a checkpoint (once a second) in storage,
    saved = stored()
    app.qtbot.waitUntil(lambda: len(app.last(tab).text) > len(saved), timeout=10_000)  # then text moves on
    assert app.controllers.streams.stream_for(tab.conversation_id) is not None


def test_clicking_a_writing_chat_in_the_sidebar_keeps_every_token(app):
    tab = app.new_tab()
    app.send(tab, "Write a long story about a lighthouse.")
    _writing_with_text(app, tab)
    app.window.open_requested.emit(tab.conversation_id)  # what a click in the sidebar does
    app.wait_done(tab)
    stored = app.stored_last(tab.conversation_id, MessageStatus.COMPLETE)
    assert stored.completion_tokens == 300
    assert app.last(tab).text == stored.content


def test_a_writing_chat_closed_and_reopened_shows_every_token(app):
    tab = app.new_tab()
    conv_id = tab.conversation_id
    app.send(tab, "Write a long story about a forest.")
    _writing_with_text(app, tab)
    app.window.tabs.tabCloseRequested.emit(app.window.tabs.indexOf(tab))
    app.qtbot.waitUntil(lambda: app.window.tab_for(conv_id) is None)
    app.qtbot.wait(300)  # tokens arrive while no view is open
    app.window.open_requested.emit(conv_id)
    app.qtbot.waitUntil(lambda: app.window.tab_for(conv_id) is not None)
    reopened = app.window.tab_for(conv_id)
    assert app.controllers.streams.stream_for(conv_id) is not None, "the reply ended before the reopen"
    app.wait_done(reopened)
    stored = app.stored_last(conv_id, MessageStatus.COMPLETE)
    assert app.last(reopened).text == stored.content


def test_send_waits_while_a_reply_is_written(app):
    from PySide6.QtCore import Qt

    tab = app.new_tab()
    app.send(tab, "Write a long story about the sea.")
    app.qtbot.waitUntil(lambda: tab.stop_button.isEnabled())
    # Stopped with some text: one stopped before its first token leaves no reply (issue 39)
    app.qtbot.waitUntil(lambda: tab.model.rowCount() == 2 and bool(app.last(tab).text), timeout=120_000)
    assert not tab.send_button.isEnabled()
    tab.composer.setPlainText("And another one.")
    app.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    assert tab.composer.toPlainText() == "And another one."  # kept, not sent
    assert tab.composer_box.queue_bar.isVisible()  # queued for the reply's end
    tab.stop_button.click()
    app.wait_done(tab)
    assert not tab.composer_box.queue_bar.isVisible()  # Stop: the message stays, unsent
    assert tab.send_button.isEnabled()
    roles = [m.role for m in app.repo.active_path(tab.conversation_id).messages]
    assert roles == ["user", "assistant"]  # one reply, not two streaming into one chat
    app.ctx.sampling = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    app.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)  # the kept message goes now
    app.qtbot.waitUntil(lambda: [m.role for m in app.repo.active_path(tab.conversation_id).messages]
                        == ["user", "assistant", "user", "assistant"], timeout=120_000)


def test_a_message_queued_while_a_reply_is_written_is_sent_when_it_ends(app):
    """Issue 39 (what users ask for): Enter while a reply is written queues the message,
    shown as queued above the box; the reply's end sends it."""
    from PySide6.QtCore import Qt

    # a long first reply: still being written when the keys land, however fast the machine
    app.ctx.sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=200, ignore_eos=True)
    tab = app.new_tab()
    app.send(tab, "Name a colour.")
    app.qtbot.waitUntil(lambda: app.controllers.streams.stream_for(tab.conversation_id) is not None)
    tab.composer.setFocus()
    app.qtbot.keyClicks(tab.composer, "And a fruit.")
    stream = app.controllers.streams.stream_for(tab.conversation_id)
    app.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    queued_while_writing = stream is not None and stream is app.controllers.streams.stream_for(tab.conversation_id)
    app.ctx.sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=8, ignore_eos=True)
    assert tab.composer_box.queue_bar.isVisible() and tab.composer.toPlainText() == "And a fruit."
    app.qtbot.waitUntil(lambda: [(m.role, m.content) for m in app.repo.active_path(tab.conversation_id).messages][2:3]
                        == [("user", "And a fruit.")], timeout=240_000)  # a busy machine is slow
    assert queued_while_writing  # (a reply that ended before the key would prove nothing)
    assert not tab.composer_box.queue_bar.isVisible() and tab.composer.toPlainText() == ""
    app.wait_done(tab, timeout=240_000)
    assert [m.role for m in app.repo.active_path(tab.conversation_id).messages] == ["user", "assistant"] * 2


def test_search_results_stay_while_chats_change(app):
    """A reply starting, a rename, a pin or a new chat used to refill the sidebar with every
    chat while the search box still held the query (the desktop issue's defect 4)."""
    app.ctx.sampling = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    lighthouse, other = app.new_tab(), app.new_tab()
    app.send(lighthouse, "Tell me about lighthouses.")
    app.send(other, "Tell me about rivers.")
    app.wait_done(lighthouse, other)
    # 8 tokens of a longer answer: the tab says the reply was cut, not just "done"
    assert lighthouse.state_label.text() == "cut at the token limit"  # its numbers: on the reply's header
    assert "8 tokens" in app.last(lighthouse).meta
    lst = app.window.conversation_list
    app.window.search_box.setText("lighthouses")
    app.qtbot.waitUntil(lambda: lst.count() == 1)  # a hit, no date headers
    shown = [lst.item(0).text()]
    app.controllers.conversations.rename(other.conversation_id, "Renamed")
    app.controllers.conversations.set_pinned(other.conversation_id, True)
    app.send(other, "More about rivers.")  # a reply starting refreshes the sidebar too
    app.controllers.conversations.new_chat()
    app.wait_done(other)
    app.qtbot.waitUntil(lambda: app.window.tabs.count() == 3)
    app.settled()  # every storage call queued so far has run, and its result reached the GUI thread
    assert [lst.item(i).text() for i in range(lst.count())] == shown
    app.window.search_box.clear()
    app.qtbot.waitUntil(lambda: len(lst.titles()) == 2)  # the new chat, nothing sent in it, is no row
