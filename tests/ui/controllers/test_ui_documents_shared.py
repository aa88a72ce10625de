"""One document asked about in two tabs, on the real model: the second tab finds the
document's tokens in the cache (the app puts it at the same place, rendered the same way,
and pins it while the chats are open), and its side panel says so."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.support.gui_app import App

pytestmark = pytest.mark.model

MANUAL = "\n\n".join(
    f"# Unit {i}\n\nThe pump of unit {i} moves coolant at {i + 10} litres a minute; its fan turns at "
    f"{1000 + 10 * i} rpm once the coolant passes 60 degrees. Service it every {i + 2} months."
    for i in range(12)
)


@pytest.fixture
def desktop(qtbot, data_dir, model_path, qt_asyncio):
    instance = App(qtbot, data_dir, model_path, max_tokens=4)
    yield instance
    instance.close()


def ask(desktop: App, tab, path, question: str) -> None:
    tray = tab.composer_box.tray
    tab.composer_box.attach([path])
    desktop.qtbot.waitUntil(lambda: len(tray.chips()) == 1 and not tray.extracting(), timeout=30_000)
    assert tray.chips()[0].details.text().endswith("tokens · fits whole")  # counted by the model's vocabulary
    tab.composer.setFocus()
    desktop.qtbot.keyClicks(tab.composer, question)
    desktop.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    desktop.wait_done(tab)


def test_a_document_asked_about_in_two_tabs_is_computed_once(desktop, tmp_path):
    path = tmp_path / "manual.md"
    path.write_text(MANUAL)
    first, second = desktop.new_tab(), desktop.new_tab()
    ask(desktop, first, path, "How fast does the fan of unit 3 turn?")
    ask(desktop, second, path, "How often is unit 5 serviced?")
    ctx = desktop.controllers.ctx
    used = ctx.session(second.conversation_id).last_prompt
    assert used.documents and used.documents[0].whole and used.document_tokens > 300
    # The second tab's reply found the whole document cached: only its question was computed.
    desktop.controllers.side_panel.load(second)
    text = second.panel.documents_label
    desktop.qtbot.waitUntil(lambda: "found cached" in text.text(), timeout=10_000)
    cached, total = text.text().split(" found cached")[0].splitlines()[-1].split(" of ")
    assert int(cached.replace(",", "")) == int(total.replace(",", "")) == used.document_tokens
    assert used.pinned_block in ctx.pins.pinned()


def test_ctrl_shift_enter_asks_each_line_in_a_new_tab_with_the_documents(desktop, tmp_path):
    path = tmp_path / "manual.md"
    path.write_text(MANUAL)
    tab = desktop.new_tab()
    tray = tab.composer_box.tray
    tab.composer_box.attach([path])
    desktop.qtbot.waitUntil(lambda: len(tray.chips()) == 1 and not tray.extracting(), timeout=30_000)
    desktop.window.activateWindow()
    desktop.qtbot.waitUntil(desktop.window.isActiveWindow)
    tab.composer.setFocus()
    lines = ["How fast does the fan of unit 2 turn?", "How often is unit 7 serviced?", "What moves coolant?"]
    for i, line in enumerate(lines):
        if i:
            desktop.qtbot.keyClick(tab.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
        desktop.qtbot.keyClicks(tab.composer, line)
    desktop.qtbot.keyClick(tab.composer, Qt.Key.Key_Return,
                           Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    window = desktop.window
    desktop.qtbot.waitUntil(lambda: window.tabs.count() == 4, timeout=20_000)
    asked = [window.tabs.widget(i) for i in range(1, 4)]
    desktop.wait_done(*asked)
    assert [t.model.view(0).text for t in asked] == lines
    assert tab.composer.toPlainText() == "" and tray.chips() == []
    ctx = desktop.controllers.ctx
    prompts = [ctx.session(t.conversation_id).last_prompt for t in asked]
    assert len({p.pinned_block for p in prompts}) == 1  # one block for the three: computed once
    for t in asked:
        path_ = desktop.repo.active_path(t.conversation_id)
        assert [a.name for a in path_.attachments[path_.messages[0].id]] == ["manual.md"]
