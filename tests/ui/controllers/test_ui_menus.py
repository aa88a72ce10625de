"""The menus of issue 11: View → Theme live and saved, File → Export…/Import… in the CLI's
formats, Help → Keyboard shortcuts from the real actions, Chat → Stop all wired. No model
(Stop all with real replies is in test_ui_app.py)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QAction, QKeySequence, QPalette
from PySide6.QtWidgets import QApplication, QFileDialog

from tests.support.databases import seed_data_dir
from tests.support.gui_app import SCREENSHOTS
from tests.support.menus_app import Shell
from tests.support.message_rows import view_point
from tests.support.pixels import bubble_colour
from tests.support.window import menu_action
from ui.theme import apply_theme, current_theme, dark_palette, light_palette
from ui.widgets.chat.code_highlight import COLORS
from ui.widgets.chat.message_delegate import bubble_color
from ui.widgets.chat.message_model import MessageView

REPLY = "Here:\n\n```python\nprint('hi')\n```\n\nthat is all, with enough words after it to fill a line.\n"


@pytest.fixture
def shell(qtbot, tmp_path, qt_asyncio):
    instance = Shell(qtbot, seed_data_dir(tmp_path / "data"))  # its database a copy: tests/support/databases.py
    yield instance
    instance.close()


@pytest.fixture(autouse=True)
def back_to_system_theme(qapp):
    """The application palette is shared by every test: each starts and ends on the system one."""
    apply_theme(qapp, "system")
    yield
    apply_theme(qapp, "system")


def _code_background(tab) -> str:
    """The colour painted behind the reply's code line, as it is on screen."""
    view = tab.view
    rect = view.visualRect(view.model().index(1, 0))
    left = view_point(view, 1, QPointF(0, 0)).x()  # the reply's text starts here
    image = view.viewport().grab().toImage()
    doc_colors = {image.pixelColor(x, y).name() for y in range(rect.top(), rect.bottom())
                  for x in range(left + 10, left + 20)}
    found = [bg for bg in (COLORS[False]["bg"], COLORS[True]["bg"]) if bg in doc_colors]
    assert len(found) == 1, f"one code background on screen, not {found}"
    return found[0]


def test_switching_the_theme_live_repaints_the_window_and_code_and_is_kept(qtbot, tmp_path, qt_asyncio, qapp):
    data = tmp_path / "data"
    first = Shell(qtbot, data)
    window = first.window
    tab = window.open_tab(1, "code")
    tab.model.set_messages([MessageView(key="u", role="user", text="show code", status="complete"),
                            MessageView(key="a", role="assistant", text=REPLY, status="complete")])
    menu_action(window, "Light").trigger()
    qtbot.waitUntil(lambda: window.palette().color(QPalette.ColorRole.Window) == light_palette().color(
        QPalette.ColorRole.Window))
    qtbot.waitUntil(lambda: _code_background(tab) == COLORS[False]["bg"])
    menu_action(window, "Dark").trigger()  # live: the same window and tab, nothing reopened
    qtbot.waitUntil(lambda: window.palette().color(QPalette.ColorRole.Window) == dark_palette().color(
        QPalette.ColorRole.Window))
    assert tab.view.palette().color(QPalette.ColorRole.Base) == dark_palette().color(QPalette.ColorRole.Base)
    qtbot.waitUntil(lambda: _code_background(tab) == COLORS[True]["bg"])
    dark_bubble = bubble_color(dark_palette(), "assistant", "complete").name()
    qtbot.waitUntil(lambda: bubble_colour(tab.view.grab().toImage(), tab.view, tab.view, 1) == dark_bubble)
    assert menu_action(window, "Dark").isChecked() and not menu_action(window, "Light").isChecked()
    first.settled()
    first.close()
    window.close()

    apply_theme(qapp, "system")  # a new start: the saved theme comes back
    second = Shell(qtbot, data)
    try:
        qtbot.waitUntil(lambda: current_theme(qapp) == "dark")
        # Qt posts the palette change to the widgets: it reaches the window an event later.
        qtbot.waitUntil(lambda: second.window.palette().color(QPalette.ColorRole.Window) == dark_palette().color(
            QPalette.ColorRole.Window))
        assert menu_action(second.window, "Dark").isChecked()
    finally:
        second.close()


def test_the_command_line_theme_wins_over_the_saved_one(qtbot, tmp_path, qt_asyncio, qapp):
    data = tmp_path / "data"
    first = Shell(qtbot, data)
    menu_action(first.window, "Dark").trigger()
    first.settled()
    first.close()
    apply_theme(qapp, "light")  # what app_main does with --theme light
    second = Shell(qtbot, data, theme="light")
    try:
        second.settled()
        assert current_theme(qapp) == "light"
        assert menu_action(second.window, "Light").isChecked()
    finally:
        second.close()


def test_system_goes_back_to_the_platform_palette(qapp):
    system = QApplication.palette().color(QPalette.ColorRole.Window)
    apply_theme(qapp, "dark")
    assert QApplication.palette().color(QPalette.ColorRole.Window) != system
    apply_theme(qapp, "system")
    assert QApplication.palette().color(QPalette.ColorRole.Window) == system


def test_the_performance_panel_plots_follow_the_theme(shell, qtbot, qapp):
    panel = shell.window.perf_panel
    panel.show()
    qtbot.waitUntil(panel.charts_ready)  # the charts are built when the panel first opens
    chart = panel.chart("throughput")
    menu_action(shell.window, "Dark").trigger()
    assert chart.view.backgroundBrush().color() == dark_palette().color(QPalette.ColorRole.Base)
    menu_action(shell.window, "Light").trigger()
    assert chart.view.backgroundBrush().color() == light_palette().color(QPalette.ColorRole.Base)


# ----- export and import ---------------------------------------------------------------


def _chat(repo, title: str, *texts: str) -> int:
    conv = repo.create_conversation(title=title)
    parent = None
    for i, text in enumerate(texts):
        parent = repo.add_message(conv.id, "user" if i % 2 == 0 else "assistant", text, parent_id=parent).id
    return conv.id


def _save_via_dialog(window, qtbot, trigger, path) -> None:
    trigger()
    dialog = next(d for d in window.findChildren(QFileDialog) if d.isVisible())
    dialog.selectFile(str(path))
    dialog.accept()


def test_export_all_then_import_into_a_fresh_data_folder(qtbot, tmp_path, qt_asyncio):
    source = Shell(qtbot, tmp_path / "one")
    _chat(source.repo, "Sorting", "How do I sort?", "Use sorted().")
    _chat(source.repo, "Greeting", "Hello", "Hi there")
    target = tmp_path / "all.json"
    with qtbot.waitSignal(source.window.export_requested) as asked:
        export_all = menu_action(source.window, "Export all chats…")
        _save_via_dialog(source.window, qtbot, export_all.trigger, target)
    assert asked.args == [str(target), "json", True]
    qtbot.waitUntil(lambda: "Exported 2 chats" in source.window.statusBar().currentMessage(), timeout=10_000)
    assert json.loads(target.read_text())["format"] == "chorus-chats"
    source.close()

    fresh = Shell(qtbot, tmp_path / "two")
    try:
        assert fresh.repo.list_conversations() == []
        dialog = fresh.window.menus.ask_import()
        qtbot.waitUntil(dialog.isVisible)
        dialog.selectFile(str(target))
        dialog.accept()
        qtbot.waitUntil(lambda: len(fresh.window.conversation_list.titles()) == 2, timeout=10_000)
        titles = sorted(c.title for c in fresh.repo.list_conversations())
        assert titles == ["Greeting", "Sorting"]
        sorting = next(c for c in fresh.repo.list_conversations() if c.title == "Sorting")
        assert [m.content for m in fresh.repo.active_path(sorting.id).messages] == ["How do I sort?", "Use sorted()."]
    finally:
        fresh.close()


def test_export_of_the_current_chat_as_markdown_by_the_filter(shell, qtbot, tmp_path):
    keep = _chat(shell.repo, "Sorting", "How do I sort?", "Use sorted().")
    _chat(shell.repo, "Other", "Not this one", "No")
    shell.window.open_tab(keep, "Sorting")
    dialog = shell.window.menus.ask_export(every=False)
    dialog.selectNameFilter("Markdown (*.md)")
    dialog.filterSelected.emit("Markdown (*.md)")  # what choosing it in the dialog does
    dialog.selectFile(str(tmp_path / "sorting"))  # no suffix: the filter's is added
    dialog.accept()
    written = tmp_path / "sorting.md"
    qtbot.waitUntil(written.exists, timeout=10_000)
    text = written.read_text()
    assert "Use sorted()." in text and "Not this one" not in text


def test_a_malformed_file_is_a_clear_message_and_adds_no_chat(shell, qtbot, tmp_path):
    _chat(shell.repo, "Mine", "keep me", "kept")
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "chorus-chats", "version": 1, "conversations": [')  # truncated
    shell.window.import_requested.emit(str(broken))
    qtbot.waitUntil(lambda: shell.window.error_box is not None and shell.window.error_box.isVisible(),
                    timeout=10_000)
    box = shell.window.error_box
    assert box.windowTitle() == "Could not import"
    assert "broken.json is not valid JSON" in box.text()
    shell.settled()
    assert [c.title for c in shell.repo.list_conversations()] == ["Mine"]


def test_an_import_that_finds_the_database_locked_too_long_says_so(shell, qtbot, tmp_path, monkeypatch):
    # Before: DatabaseBusy fell through to "storage call failed" in the log and no message.
    from storage import busy
    from storage import database as database_module

    monkeypatch.setattr(busy, "RETRY_BUDGET_S", 0.5)
    # Each try waits SQLite's busy timeout: 0.2 s here instead of 5 (the time is not the
    # subject), on connections made again with it.
    monkeypatch.setattr(database_module, "BUSY_TIMEOUT_MS", 200)
    shell.db.engine.dispose()
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"format": "chorus-chats", "version": 1, "conversations": [
        {"title": "Theirs", "messages": [{"id": 1, "role": "user", "content": "hi"}]}]}))
    holder = sqlite3.connect(shell.db.path, timeout=0)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, for longer than the budget
    try:
        shell.window.import_requested.emit(str(good))
        qtbot.waitUntil(lambda: shell.window.error_box is not None and shell.window.error_box.isVisible(),
                        timeout=30_000)
    finally:
        holder.rollback()
        holder.close()
    box = shell.window.error_box
    assert box.windowTitle() == "Could not import"
    assert "stayed locked by another process" in box.text()
    shell.settled()
    assert "Theirs" not in [c.title for c in shell.repo.list_conversations()]


HOSTILE_FILES = {  # issue 13: each ended in a traceback, one after 13 s
    "deep.json": ('{"format": "chorus-chats", "version": 1, "conversations": ['
                  + "[" * 100_000 + "]" * 100_000 + "]}", "deep.json is nested too deeply"),
    "year1.json": (json.dumps({"format": "chorus-chats", "version": 1, "conversations": [
        {"created_at": "0001-01-01T00:30:00+01:00", "messages": []}]}), "is out of range in UTC"),
    "surrogate.json": (json.dumps({"format": "chorus-chats", "version": 1, "conversations": [
        {"messages": [{"id": 1, "role": "user", "content": "owl \ud800"}]}]}),
        "conversation 1, message 1 has text that is not valid Unicode"),
}


@pytest.mark.parametrize("name", list(HOSTILE_FILES))
def test_a_hostile_file_is_refused_in_one_line_and_adds_no_chat(shell, qtbot, tmp_path, name):
    _chat(shell.repo, "Mine", "keep me", "kept")
    text, reason = HOSTILE_FILES[name]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    shell.window.import_requested.emit(str(path))
    qtbot.waitUntil(lambda: shell.window.error_box is not None and shell.window.error_box.isVisible(),
                    timeout=10_000)
    box = shell.window.error_box
    assert box.windowTitle() == "Could not import"
    assert reason in box.text() and "\n" not in box.text()
    shell.settled()
    assert [c.title for c in shell.repo.list_conversations()] == ["Mine"]


# ----- shortcuts ------------------------------------------------------------------------


def test_the_shortcuts_list_has_every_action_with_a_shortcut(shell, qtbot):
    from ui.widgets.window.shortcuts_dialog import typed

    window = shell.window
    window.open_tab(1, "a tab with its own actions")
    dialog = window.menus.show_shortcuts()
    qtbot.waitUntil(dialog.isVisible)
    assert not dialog.isModal()
    listed = {(action, keys) for _menu, action, keys in dialog.rows()}
    with_keys = [a for a in window.findChildren(QAction) if a.shortcuts()]
    assert len(with_keys) >= 12  # the File, Chat, View and Help shortcuts at least
    for action in with_keys:
        keys = ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts()
                         if typed(k))  # media keys (the platform's "Close") are not listed
        assert (action.text().replace("&", ""), keys) in listed, action.text()
    menus = {action: menu for menu, action, _keys in dialog.rows()}
    assert menus["Stop all"] == "Chat" and menus["Performance panel"] == "View"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert dialog.grab().save(str(SCREENSHOTS / "keyboard-shortcuts.png"))


def test_no_two_actions_share_a_shortcut(shell):
    seen: dict[str, str] = {}
    for action in shell.window.findChildren(QAction):
        for key in action.shortcuts():
            name = key.toString()
            assert name not in seen, f"{name}: {seen.get(name)} and {action.text()}"
            seen[name] = action.text()
    assert seen["Ctrl+Shift+S"] == "Stop all"


def test_stop_all_asks_every_stream_to_stop(shell, qtbot):
    from ui.services.stream_presenter import Stream

    cancelled = []

    class Engine:
        def cancel(self, request_id: str) -> None:
            cancelled.append(request_id)

    for i in (1, 2, 3):
        shell.ctx.streams.add(Stream(f"r{i}", i, 10 + i, recorder=None, engine=Engine()))
    menu_action(shell.window, "Stop all").trigger()
    assert sorted(cancelled) == ["r1", "r2", "r3"]
    assert "Stopped 3 replies" in shell.window.statusBar().currentMessage()


def test_export_chat_from_a_compare_tab_exports_its_comparison_as_a_group(shell, qtbot, tmp_path):
    a = _chat(shell.repo, "A", "Which sort?", "Merge sort.")
    b = _chat(shell.repo, "B", "Which sort?", "Quick sort.")
    _chat(shell.repo, "Elsewhere", "Not this one", "No")
    comparison = shell.ctx.catalog.create_comparison("Which sort?", [a, b])
    shell.window.open_compare(comparison.id, "Which sort?")
    target = tmp_path / "comparison.json"
    shell.window.export_requested.emit(str(target), "json", False)
    qtbot.waitUntil(target.exists, timeout=10_000)
    data = json.loads(target.read_text())
    assert sorted(c["title"] for c in data["conversations"]) == ["A", "B"]
    assert len(data["comparisons"]) == 1
