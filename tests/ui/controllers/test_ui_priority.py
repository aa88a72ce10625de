"""Priorities follow the user: switching tabs raises the shown tab's reply in the engine's
queue and lowers the one left (the real app on the real model; the calls to the engine
client, which sends them down the pipe, are recorded on their way through)."""

from __future__ import annotations

import pytest

from app.engines.process import EngineProcess
from inference.params import PRIORITY_TAB, PRIORITY_VISIBLE_TAB


@pytest.mark.model
def test_switching_tabs_raises_the_shown_reply_and_lowers_the_one_left(qtbot, data_dir, model_path,
                                                                        qt_asyncio, monkeypatch):
    from tests.support.gui_app import App

    calls: list[tuple[str, int]] = []
    forward = EngineProcess.set_priority

    def recording(self, request_id: str, priority: int) -> None:
        calls.append((request_id, priority))
        forward(self, request_id, priority)

    monkeypatch.setattr(EngineProcess, "set_priority", recording)
    app = App(qtbot, data_dir, model_path, max_tokens=2000)  # long replies: still live when switching
    try:
        tabs = [app.new_tab() for _ in range(3)]  # the last one opened is in front
        for tab in tabs:
            app.send(tab, "Tell me a long story.")
        qtbot.waitUntil(lambda: all(app.ctx.streams.stream_for(t.conversation_id) for t in tabs), timeout=30_000)
        streams = [app.ctx.streams.stream_for(t.conversation_id) for t in tabs]
        ids = [s.request_id for s in streams]
        assert [s.priority for s in streams] == [PRIORITY_TAB, PRIORITY_TAB, PRIORITY_VISIBLE_TAB]
        assert calls == []  # sent at those priorities: nothing to change yet

        app.window.tabs.setCurrentWidget(tabs[0])
        assert sorted(calls) == sorted([(ids[0], PRIORITY_VISIBLE_TAB), (ids[2], PRIORITY_TAB)])
        calls.clear()
        app.window.tabs.setCurrentWidget(tabs[1])
        assert sorted(calls) == sorted([(ids[1], PRIORITY_VISIBLE_TAB), (ids[0], PRIORITY_TAB)])
        assert [s.priority for s in streams] == [PRIORITY_TAB, PRIORITY_VISIBLE_TAB, PRIORITY_TAB]
        for tab in tabs:
            tab.stop_button.click()
        # A reply stopped before its first token leaves no row (issue 39): the tabs, not their replies
        qtbot.waitUntil(lambda: not any(t.busy for t in tabs), timeout=30_000)
    finally:
        app.close()
