"""Background tabs (marks, tooltips, the sidebar's state, the notification) and a tab bar
that stays readable with many tabs, without a model: replies are fed to the window's stream
presenter as the engine would (the desktop issue's background tabs and tab overflow)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QMenu, QToolButton

from inference.outputs import Delta, FinishReason
from tests.support.desk import Desk
from ui.controllers.background import NOTIFY_SETTING, finished_state, should_notify
from ui.services.stream_presenter import Stream
from ui.widgets.window.chat_tabs import MIN_TAB_W
from ui.widgets.window.sidebar_delegate import ACTIVITY_ROLE
from ui.widgets.window.tab_activity import MARKS, Activity, TabState, aggregate, tooltip
from ui.widgets.window.tray import NO_TRAY


def _text(window, widget) -> str:
    return window.tabs.tabText(window.tabs.indexOf(widget))


def _tip(window, widget) -> str:
    return window.tabs.tabToolTip(window.tabs.indexOf(widget))


# ----- background tabs -------------------------------------------------------------------------


def test_the_marks_are_drawn_by_the_ui_font(desk):
    metrics = QFontMetrics(desk.window.tabs.tabBar().font())
    for state, mark in MARKS.items():
        if mark:
            assert metrics.inFontUcs4(ord(mark[0])), f"the {state.value} mark would draw as an empty box"
    assert len({m for m in MARKS.values()}) == len(MARKS), "every state has its own mark"


def test_a_background_reply_is_marked_writing_then_unread_until_viewed(desk, qtbot):
    w = desk.window
    back = desk.chat("Lighthouses")
    front = desk.chat("Rivers")  # opened last: in front
    assert w.tabs.currentWidget() is front
    desk.conversations = desk.controllers.conversations
    desk.conversations.refresh()
    qtbot.waitUntil(lambda: w.conversation_list.row_for(back.conversation_id) is not None)
    stream = desk.stream(back.conversation_id)
    texts = []
    w.tabs.setTabText = lambda i, text, set_text=w.tabs.setTabText: (texts.append(text), set_text(i, text))
    desk.write_for(stream, 1500)
    qtbot.waitUntil(lambda: "tok/s" in _tip(w, back))
    assert _text(w, back) == "● Lighthouses"
    assert _tip(w, back).startswith("Lighthouses\nwriting · ")
    # The tab bar is laid out again when the mark changes, not with every token.
    assert texts == ["● Lighthouses"]
    row = w.conversation_list.row_for(back.conversation_id)
    qtbot.waitUntil(lambda: row.data(ACTIVITY_ROLE).state is TabState.WRITING
                    and row.data(ACTIVITY_ROLE).rate is not None)
    desk.finish(stream)
    qtbot.waitUntil(lambda: _text(w, back) == "✓ Lighthouses")
    assert _tip(w, back) == "Lighthouses\nfinished, unread"
    desk.qtbot.wait(600)  # a tick later the mark stays: it waits for the user
    assert _text(w, back) == "✓ Lighthouses"
    assert w.conversation_list.row_for(back.conversation_id).data(ACTIVITY_ROLE).state is TabState.UNREAD
    w.tabs.setCurrentWidget(back)
    qtbot.waitUntil(lambda: _text(w, back) == "Lighthouses")
    w.tabs.setCurrentWidget(front)
    assert _text(w, back) == "Lighthouses"  # seen: no mark when it goes to the background again
    assert _tip(w, back) == "Lighthouses\nready"
    assert w.conversation_list.row_for(back.conversation_id).data(ACTIVITY_ROLE).state is TabState.READY


def test_the_front_tab_a_stopped_reply_and_a_failed_one(desk, qtbot):
    w = desk.window
    failed, stopped, front = desk.chat("Failed"), desk.chat("Stopped"), desk.chat("Front")
    streams = {tab: desk.stream(tab.conversation_id) for tab in (failed, stopped, front)}
    for stream in streams.values():
        desk.token(stream)
    qtbot.waitUntil(lambda: _text(w, failed).startswith("● ") and _text(w, stopped).startswith("● "))
    assert _text(w, front) == "Front"  # the tab in front shows what it does on its own
    desk.finish(streams[failed], FinishReason.ERROR)
    desk.finish(streams[stopped], FinishReason.CANCELLED)
    desk.finish(streams[front])
    qtbot.waitUntil(lambda: _text(w, failed) == "✗ Failed")
    assert _tip(w, failed) == "Failed\nerror"
    qtbot.waitUntil(lambda: _text(w, stopped) == "Stopped")
    assert _text(w, front) == "Front" and _tip(w, front) == "Front\nready"


def test_a_compare_tab_shows_its_panes_together(desk, qtbot):
    w = desk.window
    view, _made = w.open_compare(7, "Sorting")
    a = view.add_pane(desk.repo.create_conversation().id, "a")
    b = view.add_pane(desk.repo.create_conversation().id, "b")
    desk.chat("Front")
    first, second = desk.stream(a.conversation_id), desk.stream(b.conversation_id)
    for _ in range(40):
        desk.token(first)
        desk.token(second)
        qtbot.wait(20)
    qtbot.waitUntil(lambda: "tok/s" in _tip(w, view))
    assert _text(w, view).startswith("● ")
    desk.finish(first)
    qtbot.wait(100)
    assert _text(w, view).startswith("● ")  # one pane still writes
    desk.finish(second)
    qtbot.waitUntil(lambda: _text(w, view).startswith("✓ "))


def test_aggregate_and_tooltip():
    writing = Activity(TabState.WRITING, 20.0)
    assert aggregate([writing, Activity(TabState.WRITING, 5.0), Activity(TabState.UNREAD)]) == \
        Activity(TabState.WRITING, 25.0)
    assert aggregate([Activity(TabState.UNREAD), Activity(TabState.ERROR)]).state is TabState.ERROR
    assert aggregate([]).state is TabState.READY
    assert tooltip("Chat", Activity(TabState.WRITING, 4.25)) == "Chat\nwriting · 4.2 tok/s"
    assert tooltip("Chat", Activity(TabState.WAITING)) == "Chat\nwaiting for the first token"


# ----- the notification --------------------------------------------------------------------


@pytest.mark.parametrize(("enabled", "reason", "active", "showing", "others", "expected"), [
    (True, FinishReason.STOP, True, False, False, True),  # another tab in front
    (True, FinishReason.STOP, False, True, False, True),  # its tab in front, the window behind
    (True, FinishReason.STOP, True, True, False, False),  # the user is looking at it
    (False, FinishReason.STOP, False, False, False, False),  # the option is off
    (True, FinishReason.CANCELLED, False, False, False, False),  # the user stopped it
    (True, FinishReason.ERROR, True, False, False, True),  # a failure tells too
    (True, FinishReason.LENGTH, True, False, True, False),  # other panes of its comparison still write
])
def test_which_finish_notifies(enabled, reason, active, showing, others, expected):
    assert should_notify(enabled, reason, active, showing, others) is expected


def test_finished_state():
    assert finished_state(FinishReason.STOP, showing=False) is TabState.UNREAD
    assert finished_state(FinishReason.INTERRUPTED, showing=False) is TabState.ERROR
    assert finished_state(FinishReason.STOP, showing=True) is TabState.READY
    assert finished_state(FinishReason.CANCELLED, showing=False) is TabState.READY


def test_a_background_finish_sends_one_notification(desk, qtbot, monkeypatch):
    w = desk.window
    sent = []
    monkeypatch.setattr(w.notifier, "available", lambda: True)
    monkeypatch.setattr(w.notifier, "notify", lambda *args: sent.append(args))
    monkeypatch.setattr(w, "isActiveWindow", lambda: True)
    back, front = desk.chat("Background chat"), desk.chat("Front chat")
    for tab in (back, front):
        stream = desk.stream(tab.conversation_id)
        desk.token(stream)
        desk.finish(stream)
    qtbot.waitUntil(lambda: _text(w, back).startswith("✓ "))
    assert sent == []  # off by default
    w.notifier.action.setChecked(True)
    for tab in (back, front):
        stream = desk.stream(tab.conversation_id)
        desk.token(stream)
        desk.finish(stream)
    qtbot.waitUntil(lambda: len(sent) == 1)
    qtbot.wait(100)
    assert sent == [(back.conversation_id, "Reply finished", "“Background chat”")]  # not the front one


def test_clicking_the_message_shows_its_chat(desk, qtbot):
    back = desk.chat("Background chat")
    desk.chat("Front chat")
    desk.window.notifier.clicked.emit(back.conversation_id)
    qtbot.waitUntil(lambda: desk.window.tabs.currentWidget() is back)


def test_the_option_is_saved_and_says_why_it_is_off_without_a_tray(qtbot, tmp_path):
    first = Desk(qtbot, tmp_path)
    try:
        action = first.window.notifier.action
        assert action.isCheckable() and not action.isChecked()
        view = next(a.menu() for a in first.window.menuBar().actions() if a.text() == "&View")
        assert action in view.actions()
        if not first.window.notifier.available():  # offscreen: no tray
            assert not action.isEnabled() and action.toolTip() == NO_TRAY
        action.setChecked(True)
        qtbot.waitUntil(lambda: first.ctx.catalog.get_setting(NOTIFY_SETTING) is True)
    finally:
        first.close()
    second = Desk(qtbot, tmp_path)
    try:
        qtbot.waitUntil(lambda: second.window.notifier.action.isChecked())
    finally:
        second.close()


# ----- many tabs -------------------------------------------------------------------------------


def test_twelve_tabs_stay_readable_and_the_list_switches(desk, qtbot):
    w = desk.window
    tabs = [desk.chat(f"Chat number {i} about a rather long subject") for i in range(12)]
    bar = w.tabs.tabBar()
    qtbot.waitUntil(lambda: bar.tabRect(11).width() > 0)
    widths = [bar.tabRect(i).width() for i in range(12)]
    assert min(widths) >= MIN_TAB_W, widths
    assert sum(widths) > bar.width()  # they do not fit: the bar scrolls
    arrows = [b for b in bar.findChildren(QToolButton) if b.isVisible()]
    assert arrows, "no scroll buttons"
    assert w.tabs.list_button.isVisible()
    menu = w.tabs.tab_list_menu()
    actions = menu.actions()
    assert len(actions) == 12
    # Issue 39, defect 13: the current tab was ticked in a column of checkboxes; now bold.
    assert not any(a.isCheckable() for a in actions)
    assert [a.font().bold() for a in actions] == [i == 11 for i in range(12)]
    assert actions[3].text() == "Chat number 3 about a rather long subject"
    actions[3].trigger()
    qtbot.waitUntil(lambda: w.tabs.currentWidget() is tabs[3])
    w.tabs.list_button.click()  # the button pops the list up (no nested event loop)
    qtbot.waitUntil(lambda: any(m.isVisible() for m in w.tabs.findChildren(QMenu)))
    for m in w.tabs.findChildren(QMenu):
        m.close()


# ----- on the real model ----------------------------------------------------------------------


@pytest.mark.model
def test_screenshot_of_four_tabs_writing(qtbot, data_dir, model_path, theme):
    from tests.support.gui_app import SCREENSHOTS, WAIT_MS, App

    # Replies long enough to be writing together for several of the activity timer's ticks:
    # with 48 tokens a quiet machine finished the first before the third showed a rate.
    shot = App(qtbot, data_dir, model_path, max_tokens=240)
    try:
        w = shot.window
        tabs = [shot.new_tab() for _ in range(4)]
        prompts = ["Explain how a hash map works.", "Write a poem about the sea.",
                   "List tips for learning to cook.", "Describe a walk in the forest."]
        for tab, prompt in zip(tabs, prompts):
            shot.send(tab, prompt)
        shot.wait_streaming(*tabs)
        background = tabs[:3]  # the last one opened is in front
        qtbot.waitUntil(lambda: all(_text(w, t).startswith("● ") and "tok/s" in _tip(w, t) for t in background),
                        timeout=30_000)
        qtbot.waitUntil(lambda: all(r is not None and r.data(ACTIVITY_ROLE).state is TabState.WRITING
                                    for r in (w.conversation_list.row_for(t.conversation_id) for t in tabs)),
                        timeout=10_000)
        qtbot.waitUntil(lambda: len(shot.last(tabs[3]).text) > 60, timeout=WAIT_MS)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        assert w.grab().save(str(SCREENSHOTS / f"tabs-writing-{theme}.png"))
        assert not _text(w, tabs[3]).startswith("● ")  # the tab in front shows its reply instead
        shot.wait_done(*tabs, timeout=2 * WAIT_MS)  # a shared machine can be slow
        # Each background reply ended out of sight: marked until its tab is shown.
        qtbot.waitUntil(lambda: all(_text(w, t).startswith("✓ ") for t in background))
        assert not _text(w, tabs[3]).startswith(("✓ ", "● "))
        w.tabs.setCurrentWidget(tabs[0])
        qtbot.waitUntil(lambda: not _text(w, tabs[0]).startswith("✓ "))
    finally:
        shot.close()


def test_a_finished_reply_is_recorded_with_the_wait_the_user_had(desk, qtbot):
    """The last delta's stats are rewritten for the chat (its time to first token is the
    user's whole wait, its tokens those of the whole message) before they are saved."""
    from inference.outputs import RequestStats

    conv = desk.repo.create_conversation(title="Stats")
    desk.window.open_tab(conv.id, "Stats")
    saved = []
    stream = Stream("r-stats", conv.id, message_id=1, recorder=SimpleNamespace(on_delta=saved.append, cite=None))
    stream.base_tokens = 5  # a continued reply: 5 tokens were there before
    desk.streams.add(stream)
    desk.token(stream)
    stats = RequestStats(prompt_tokens=9, cached_tokens=0, generated_tokens=3, queue_s=0.0, ttft_s=0.01,
                         decode_tok_s=None, itl_p50_s=None, itl_p95_s=None, total_s=0.5)
    desk.streams.on_delta(Delta.finished_with(stream.request_id, FinishReason.STOP, stats=stats))
    qtbot.waitUntil(lambda: any(d.finished for d in saved))
    shown = next(d for d in saved if d.finished).stats
    assert shown.generated_tokens == 8 and shown.prompt_tokens == 9
    assert shown.ttft_s == stream.waited_s()
