"""Replies written out of sight: each conversation's activity (writing and its rate, a reply
finished but not yet looked at, an error) on its tab, the tab's tooltip and its sidebar
row, and a desktop notification when one finishes (an option, off by default).

The rates change with every token, so they are read from the streams twice a second
(TICK_MS) rather than per frame: a background tab costs a tooltip and a row repaint, and its
tab text (which lays the bar out again) changes only with its state."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer

from inference import Delta, FinishReason, Phase
from ui.services.context import ControllerContext
from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.compare.compare_view import ComparePane
from ui.widgets.window.tab_activity import READY, Activity, TabState, aggregate

TICK_MS = 500
NOTIFY_SETTING = "notify_background_replies"
_LIVE = (TabState.WRITING, TabState.WAITING, TabState.TOOL)
_FAILED = (FinishReason.ERROR, FinishReason.INTERRUPTED)
_KEPT = (TabState.UNREAD, TabState.ERROR)


def finished_state(reason: FinishReason | None, showing: bool) -> TabState:
    """What a reply's end leaves on its tab: nothing when it was on screen or stopped by
    the user, else a mark that stays until the tab is looked at."""
    if showing or reason is FinishReason.CANCELLED:
        return TabState.READY
    return TabState.ERROR if reason in _FAILED else TabState.UNREAD


def should_notify(enabled: bool, reason: FinishReason | None, window_active: bool, showing: bool,
                  panes_still_writing: bool = False) -> bool:
    """A desktop message for a reply that ended out of sight: the window in the background or
    its tab not in front. Not for one the user stopped, nor for one pane of a comparison
    whose other panes still write (the last one to end tells)."""
    if not enabled or reason is FinishReason.CANCELLED or panes_still_writing:
        return False
    return not window_active or not showing


class BackgroundController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.activity: dict[int, Activity] = {}  # conversation id -> what it does; absent: ready
        self._chosen = False  # the notification option was toggled since the start
        self._timer = QTimer()
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self.tick)
        w = ctx.window
        ctx.streams.reply_finished.connect(lambda stream, delta: self.on_finished(stream.conversation_id, delta))
        w.tabs.currentChanged.connect(self._viewed)
        w.notifier.action.toggled.connect(self._save_choice)
        w.notifier.clicked.connect(self._bring_up)

    def start(self) -> None:
        catalog = self.ctx.catalog
        self.ctx.storage.run(lambda: bool(catalog.get_setting(NOTIFY_SETTING, False)), self._saved_choice)
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    # ----- state ---------------------------------------------------------------------------

    def state_of(self, conversation_id: int) -> Activity:
        return self.activity.get(conversation_id, READY)

    def tick(self) -> None:
        """The live streams' states and rates onto their tabs and rows."""
        now = time.monotonic()
        live = {s.conversation_id: s for s in self.ctx.streams.live()}
        for conv_id, stream in live.items():
            writing = stream.phase is Phase.DECODING
            self.activity[conv_id] = (Activity(TabState.WRITING, stream.rate(now)) if writing
                                      else Activity(TabState.WAITING))
            self._push(conv_id)  # every tick: a view opened since gets it too
        tools = self.ctx.waiting_on_tools()  # chats between a reply's turns (ui/controllers/tool_rounds.py)
        for conv_id, detail in tools.items():
            if conv_id not in live:
                self._set(conv_id, Activity(TabState.TOOL, detail=detail))
        for conv_id, activity in list(self.activity.items()):
            if activity.state in _LIVE and conv_id not in live and conv_id not in tools:  # gone without an end
                self._set(conv_id, READY)

    def on_finished(self, conversation_id: int, delta: Delta) -> None:
        window = self.ctx.window
        view = window.view_for(conversation_id)
        showing = view is not None and window.is_showing(view)
        self._set(conversation_id, Activity(finished_state(delta.finish_reason, showing)))
        others = [p for p in view.compare.panes() if p is not view] if isinstance(view, ComparePane) else []
        still = any(self.state_of(p.conversation_id).state in _LIVE for p in others)
        if should_notify(window.notifier.enabled(), delta.finish_reason, window.isActiveWindow(), showing, still):
            self._notify(conversation_id, view, delta.finish_reason in _FAILED)

    def _set(self, conversation_id: int, activity: Activity) -> None:
        if self.state_of(conversation_id) == activity:
            return
        if activity == READY:
            self.activity.pop(conversation_id, None)
        else:
            self.activity[conversation_id] = activity
        self._push(conversation_id)

    def _push(self, conversation_id: int) -> None:
        """A conversation's activity onto its sidebar row and its tab (a compare tab: all its panes')."""
        activity = self.state_of(conversation_id)
        window = self.ctx.window
        window.conversation_list.set_activity(conversation_id, False, activity)
        view = window.view_for(conversation_id)
        if isinstance(view, ChatTab):
            window.tabs.show_activity(view, activity)
        elif isinstance(view, ComparePane):
            compare = view.compare
            combined = aggregate(self.state_of(p.conversation_id) for p in compare.panes())
            window.tabs.show_activity(compare, combined)
            window.conversation_list.set_activity(compare.comparison_id, True, combined)

    def _viewed(self, index: int) -> None:
        """The tab in front has been seen: its unread or failed mark goes."""
        widget = self.ctx.window.tabs.widget(index)
        panes = widget.panes() if hasattr(widget, "panes") else [widget] if widget is not None else []
        for view in panes:
            if self.state_of(view.conversation_id).state in _KEPT:
                self._set(view.conversation_id, READY)

    # ----- kept over a restart (ui/services/window_state.py) ----------------------------

    def marks(self) -> dict[int, str]:
        """The marks that wait for the user (unread, failed), by conversation: live states
        end with the process, so they are not kept."""
        return {conv_id: a.state.name for conv_id, a in self.activity.items() if a.state in _KEPT}

    def restore_marks(self, marks: dict[int, str]) -> None:
        window = self.ctx.window
        for conv_id, name in marks.items():
            view = window.view_for(conv_id)
            if name in TabState.__members__ and not (view is not None and window.is_showing(view)):
                self._set(conv_id, Activity(TabState[name]))

    # ----- the notification ---------------------------------------------------------------------

    def _notify(self, conversation_id: int, view, failed: bool) -> None:
        window = self.ctx.window
        if isinstance(view, ComparePane):
            title = view.compare.title or "Comparison"
        else:
            title = (view.title if view is not None else window.conversation_list.title_of(conversation_id))
        window.notifier.notify(conversation_id, "Reply failed" if failed else "Reply finished",
                               f"“{title or 'New chat'}”")

    def _saved_choice(self, on: bool) -> None:
        if not self._chosen:  # a choice made while this was being read wins
            self.ctx.window.notifier.set_enabled(on)

    def _save_choice(self, on: bool) -> None:
        self._chosen = True
        self.ctx.storage.submit(self.ctx.catalog.set_setting, NOTIFY_SETTING, bool(on))

    def _bring_up(self, conversation_id: int) -> None:
        """A click on the message: the window in front, showing that chat."""
        window = self.ctx.window
        window.showNormal()
        window.raise_()
        window.activateWindow()
        window.open_requested.emit(conversation_id)
