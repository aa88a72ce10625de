"""Chat → Stop all (Ctrl+Shift+S) on the real model: replies writing in several tabs and in a
compare view's panes all stop, each keeping the text it had written (shown and stored)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from inference import SamplingParams
from storage import MessageStatus
from tests.ui.controllers.test_ui_compare import last, open_comparison, send

pytestmark = pytest.mark.model


def test_stop_all_stops_every_tab_and_pane_and_keeps_their_text(app):
    # Long replies: nothing may finish by itself before Stop all.
    app.ctx.sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=3000, ignore_eos=True)
    tabs = [app.new_tab() for _ in range(3)]
    for i, tab in enumerate(tabs):
        app.send(tab, f"Count from {i} upwards, one number per line.")
    compare = open_comparison(app)
    send(compare, "Describe the sea at length.")
    panes = compare.panes()
    app.wait_streaming(*tabs)  # background tabs: their text is drawn when they are shown
    app.qtbot.waitUntil(lambda: all(p.model.rowCount() >= 2 and last(p).text for p in panes), timeout=120_000)
    app.window.activateWindow()
    app.qtbot.keyClick(compare.composer, Qt.Key.Key_S,
                       Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    app.qtbot.waitUntil(lambda: not compare.busy() and all(last(p).status == "stopped" for p in panes),
                        timeout=30_000)
    for tab in tabs:
        app.window.tabs.setCurrentWidget(tab)
        app.wait_done(tab, timeout=30_000)
    for view, shown in [(t, app.last(t)) for t in tabs] + [(p, last(p)) for p in panes]:
        assert shown.status == "stopped", view.conversation_id
        assert shown.text  # the text written before the stop stays
        stored = app.stored_last(view.conversation_id, MessageStatus.STOPPED)
        assert stored.content == shown.text
    assert "Stopped 5 replies" in app.window.statusBar().currentMessage()
