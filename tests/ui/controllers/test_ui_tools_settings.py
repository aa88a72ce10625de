"""Settings → Tools (issue 24): the app's MCP servers added through the Add dialog or an
imported mcpServers document, shown with their states as they change (ready · 6 tools, or
failed with the reason and the server's stderr), their tools listed, removed, restarted,
the tool loop's limits saved; all kept for the next start. The servers are real child
processes: the SDK-made test server, and commands that fail."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QDialogButtonBox

from app.tools import StdioServer
from tests.support.desk import Desk, open_tools_settings
from ui.widgets.tools.tools_settings import state_text

TEST_SERVER = Path(__file__).parents[2] / "support" / "mcp_test_server.py"
TEST_COMMAND = shlex.join([sys.executable, str(TEST_SERVER), "stdio"])
STARTS = 60_000  # ms: a child Python importing the MCP SDK, on a busy CI machine
TEST_TOOLS = ["add", "slow", "big", "wait", "fail", "picture"]


@pytest.fixture
def tools(desk):
    yield desk.ctx.tools
    desk.ctx.tools.shutdown()  # the servers' child processes end with the test


@pytest.fixture(autouse=True)
def active(desk, qtbot) -> None:
    desk.window.activateWindow()
    qtbot.waitUntil(desk.window.isActiveWindow)


def _click(widget) -> None:
    QTest.mouseClick(widget, Qt.MouseButton.LeftButton)


def _open_add(page):
    _click(page.add_button)
    page_dialog = page.dialog
    assert page_dialog is not None
    QTest.qWaitForWindowExposed(page_dialog)
    return page_dialog


def _add(desk: Desk, page, command: str, name: str = ""):
    dialog = _open_add(page)
    desk.qtbot.keyClicks(dialog.command, command)
    if name:
        desk.qtbot.keyClicks(dialog.name, name)
    _click(dialog.add_button)
    return dialog


def _type_lines(desk: Desk, box, lines: list[str]) -> None:
    box.setFocus()
    for number, line in enumerate(lines):
        if number:
            desk.qtbot.keyClick(box, Qt.Key.Key_Return)
        desk.qtbot.keyClicks(box, line)


def _rows(page) -> dict[str, tuple[str, str]]:
    """name -> (what it runs, its state) as the list shows them."""
    items = [page.servers.topLevelItem(i) for i in range(page.servers.topLevelItemCount())]
    return {item.text(0): (item.text(1), item.text(2)) for item in items}


def _state(page, name: str) -> str:
    return _rows(page).get(name, ("", ""))[1]


def _select(page, name: str) -> None:
    item = next(page.servers.topLevelItem(i) for i in range(page.servers.topLevelItemCount())
                if page.servers.topLevelItem(i).text(0) == name)
    rect = page.servers.visualItemRect(item)
    QTest.mouseClick(page.servers.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def _listed_tools(page) -> dict[str, str]:
    items = [page.tool_list.topLevelItem(i) for i in range(page.tool_list.topLevelItemCount())]
    return {item.text(0): item.text(1) for item in items}


def _with_test_server(desk: Desk, tools) -> None:
    tools.add(StdioServer("test", sys.executable, (str(TEST_SERVER), "stdio")))
    desk.qtbot.waitUntil(lambda: len(tools.tools()) == len(TEST_TOOLS), timeout=STARTS)


def _import(desk: Desk, page, text: str):
    _click(page.import_button)
    dialog = page.dialog
    QTest.qWaitForWindowExposed(dialog)
    dialog.text.setFocus()
    desk.qtbot.keyClicks(dialog.text, text)
    _click(dialog.import_button)
    return dialog


# ----- adding ------------------------------------------------------------------------------------


def test_the_test_server_added_through_the_dialog_becomes_ready_and_its_tools_are_listed(desk, tools):
    page = open_tools_settings(desk)
    assert _rows(page) == {} and "No servers yet" in page.details.text()
    dialog = _add(desk, page, TEST_COMMAND, "test")
    desk.qtbot.waitUntil(lambda: not dialog.isVisible())
    desk.qtbot.waitUntil(lambda: _state(page, "test") == "ready · 6 tools", timeout=STARTS)
    assert _rows(page)["test"][0] == TEST_COMMAND, "what it runs, as a command line"
    _select(page, "test")
    desk.qtbot.waitUntil(lambda: list(_listed_tools(page)) == TEST_TOOLS)
    assert _listed_tools(page)["add"] == "Adds two whole numbers."
    assert page.details.text() == "test: ready · 6 tools" and not page.stderr.isVisible()
    assert tools.configs() == (StdioServer("test", sys.executable, (str(TEST_SERVER), "stdio")),)


def test_a_server_added_without_a_name_is_named_after_what_it_runs(desk, tools):
    page = open_tools_settings(desk)
    _add(desk, page, TEST_COMMAND)
    desk.qtbot.waitUntil(lambda: list(_rows(page)) == ["mcp_test_server.py"])
    desk.qtbot.waitUntil(lambda: _state(page, "mcp_test_server.py") == "ready · 6 tools", timeout=STARTS)


def test_the_add_dialog_says_what_is_wrong_and_adds_nothing(desk, tools):
    page = open_tools_settings(desk)
    dialog = _open_add(page)
    _click(dialog.add_button)
    assert dialog.isVisible() and dialog.error.isVisible()
    assert dialog.error.text().startswith("Command line: write the program")
    desk.qtbot.keyClicks(dialog.command, 'uvx "mcp-server-time')
    _click(dialog.add_button)
    assert dialog.error.text() == "Command line: No closing quotation"
    dialog.command.clear()
    desk.qtbot.keyClicks(dialog.command, "uvx mcp-server-time")
    dialog.env.setFocus()
    _type_lines(desk, dialog.env, ["TZ=UTC", "no equals sign"])
    _click(dialog.add_button)
    assert dialog.error.text() == "Environment, line 2: write KEY=VALUE, got 'no equals sign'"
    dialog.env.clear()
    desk.qtbot.keyClicks(dialog.cwd, "/no/such/folder")
    _click(dialog.add_button)
    assert dialog.error.text() == "Working folder: /no/such/folder is not a folder"
    _click(dialog.http_choice)
    desk.qtbot.keyClicks(dialog.url, "example.com/mcp")
    _click(dialog.add_button)
    assert dialog.error.text().startswith("URL: write the server's http://")
    assert dialog.isVisible() and tools.configs() == () and _rows(page) == {}
    _click(dialog.buttons.button(QDialogButtonBox.StandardButton.Cancel))
    desk.qtbot.waitUntil(lambda: not dialog.isVisible())
    assert tools.configs() == ()


def test_a_streamable_http_server_is_added_with_its_headers(desk, tools):
    page = open_tools_settings(desk)
    dialog = _open_add(page)
    _click(dialog.http_choice)
    desk.qtbot.keyClicks(dialog.url, "http://127.0.0.1:9/mcp")  # nothing listens there: it fails
    dialog.headers.setFocus()
    _type_lines(desk, dialog.headers, ["Authorization: Bearer abc", "X-Team:  tools "])
    _click(dialog.add_button)
    desk.qtbot.waitUntil(lambda: list(_rows(page)) == ["127.0.0.1"])
    config = tools.configs()[0]
    assert (config.url, dict(config.headers)) == ("http://127.0.0.1:9/mcp",
                                                  {"Authorization": "Bearer abc", "X-Team": "tools"})
    desk.qtbot.waitUntil(lambda: _state(page, "127.0.0.1").startswith("failed: "), timeout=STARTS)


def test_a_name_already_taken_is_refused(desk, tools):
    _with_test_server(desk, tools)
    page = open_tools_settings(desk)
    dialog = _add(desk, page, "uvx mcp-server-time", "test")
    assert dialog.isVisible() and "a server named 'test' already" in dialog.error.text()
    assert [c.command for c in tools.configs()] == [sys.executable]


# ----- failing -----------------------------------------------------------------------------------


def test_a_server_whose_command_fails_shows_failed_with_the_reason_and_its_stderr(desk, tools):
    page = open_tools_settings(desk)
    crash = shlex.join([sys.executable, "-c", "import sys; sys.stderr.write('no API token given\\n'); sys.exit(3)"])
    _add(desk, page, crash, "crashes")
    desk.qtbot.waitUntil(lambda: _state(page, "crashes").startswith("failed: "), timeout=STARTS)
    assert _state(page, "crashes") == "failed: exited before it answered"
    _select(page, "crashes")
    desk.qtbot.waitUntil(lambda: page.stderr.isVisible())
    assert "no API token given" in page.stderr.toPlainText()
    item = page.servers.topLevelItem(0)
    assert "no API token given" in item.toolTip(2), "the stderr's tail in the state's tooltip too"
    assert page.details.text() == "crashes: failed: exited before it answered" and _listed_tools(page) == {}


def test_a_program_that_does_not_exist_fails_with_the_reason(desk, tools):
    page = open_tools_settings(desk)
    _add(desk, page, "/no/such/mcp-server --stdio", "missing")
    desk.qtbot.waitUntil(lambda: _state(page, "missing").startswith("failed: "), timeout=STARTS)
    assert "cannot start" in _state(page, "missing") and "/no/such/mcp-server" in _state(page, "missing")


# ----- importing ---------------------------------------------------------------------------------


def test_an_imported_mcp_servers_document_adds_its_servers(desk, tools):
    _with_test_server(desk, tools)
    page = open_tools_settings(desk)
    document = {"mcpServers": {
        "again": {"command": sys.executable, "args": [str(TEST_SERVER), "stdio"], "env": {"TZ": "UTC"}},
        "off": {"command": "never-run", "disabled": True},
    }}
    dialog = _import(desk, page, json.dumps(document))
    desk.qtbot.waitUntil(lambda: not dialog.isVisible())
    desk.qtbot.waitUntil(lambda: list(_rows(page)) == ["test", "again"])
    desk.qtbot.waitUntil(lambda: _state(page, "again") == "ready · 6 tools", timeout=STARTS)
    assert _state(page, "test") == "ready · 6 tools", "the server already there is kept"
    assert dict(tools.configs()[1].env) == {"TZ": "UTC"}


@pytest.mark.parametrize(("text", "error"), [
    ('{"mcpServers": {"x": {"command": 3}}}', "mcpServers.x.command: must be a non-empty string, got 3"),
    ('{"mcpServers": {"x": {"command": "uvx"}', "not JSON: Expecting ',' delimiter: line 1 column 40 (char 39)"),
    ('{"servers_of_mine": {}}', 'has no "mcpServers" object'),
])
def test_a_malformed_document_shows_the_error_and_changes_nothing(desk, tools, text, error):
    _with_test_server(desk, tools)
    before = tools.configs()
    page = open_tools_settings(desk)
    dialog = _import(desk, page, text)
    assert dialog.isVisible() and dialog.error.isVisible()
    assert dialog.error.text() == error
    assert tools.configs() == before and list(_rows(page)) == ["test"]
    desk.settled()
    assert list(desk.ctx.catalog.get_setting("mcp_servers")["mcpServers"]) == ["test"]


# ----- remove, restart ---------------------------------------------------------------------------


def test_remove_stops_the_server_and_forgets_it(desk, tools):
    _with_test_server(desk, tools)
    page = open_tools_settings(desk)
    assert page.selected() == "test" and page.remove_button.isEnabled()
    _click(page.remove_button)
    desk.qtbot.waitUntil(lambda: _rows(page) == {})
    assert tools.configs() == () and not page.remove_button.isEnabled()
    desk.qtbot.waitUntil(lambda: tools.tools() == ())
    desk.settled()
    assert desk.ctx.catalog.get_setting("mcp_servers") == {"mcpServers": {}}


def test_restart_starts_the_server_again(desk, tools):
    _with_test_server(desk, tools)
    page = open_tools_settings(desk)
    seen: list[str] = []
    tools.changed.connect(lambda: seen.append(state_text(tools.state("test"))))
    _select(page, "test")
    _click(page.restart_button)
    desk.qtbot.waitUntil(lambda: "starting…" in seen)
    assert _state(page, "test") in ("starting…", "ready · 6 tools")
    desk.qtbot.waitUntil(lambda: seen[-1] == "ready · 6 tools" and _state(page, "test") == "ready · 6 tools",
                         timeout=STARTS)


# ----- the limits, and the next start ------------------------------------------------------------


def _type_into(desk: Desk, spin, value: int) -> None:
    spin.setFocus()
    spin.selectAll()
    desk.qtbot.keyClicks(spin, str(value))
    assert spin.value() == value


def test_the_limits_are_saved_with_save(desk, tools):
    page = open_tools_settings(desk)
    assert [page.limits[n].value() for n in ("output_cap", "timeout_s", "max_rounds")] == [20_000, 60, 5]
    _type_into(desk, page.limits["output_cap"], 5000)
    _type_into(desk, page.limits["timeout_s"], 30)
    _type_into(desk, page.limits["max_rounds"], 3)
    settings = desk.controllers.settings.window
    _click(settings.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Save))
    desk.qtbot.waitUntil(lambda: not settings.isVisible())
    desk.settled()
    assert desk.ctx.catalog.get_setting("tool_settings") == {"output_cap": 5000, "timeout_s": 30.0, "max_rounds": 3}
    assert (tools.settings.output_cap, tools.settings.timeout_s, tools.settings.max_rounds) == (5000, 30.0, 3)
    page = open_tools_settings(desk)
    assert [page.limits[n].value() for n in ("output_cap", "timeout_s", "max_rounds")] == [5000, 30, 3]
    _click(settings.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.RestoreDefaults))
    assert [page.limits[n].value() for n in ("output_cap", "timeout_s", "max_rounds")] == [20_000, 60, 5]


def test_cancel_keeps_the_limits_as_they_were(desk, tools):
    page = open_tools_settings(desk)
    _type_into(desk, page.limits["max_rounds"], 9)
    settings = desk.controllers.settings.window
    _click(settings.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Cancel))
    desk.qtbot.waitUntil(lambda: not settings.isVisible())
    desk.settled()
    assert tools.settings.max_rounds == 5 and desk.ctx.catalog.get_setting("tool_settings") is None


def test_the_servers_and_limits_are_kept_for_the_next_start(desk, tools, qtbot, tmp_path):
    page = open_tools_settings(desk)
    _add(desk, page, TEST_COMMAND, "test")
    _type_into(desk, page.limits["max_rounds"], 7)
    settings = desk.controllers.settings.window
    _click(settings.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Save))
    desk.qtbot.waitUntil(lambda: not settings.isVisible())
    desk.settled()
    assert desk.ctx.catalog.get_setting("mcp_servers") == {
        "mcpServers": {"test": {"command": sys.executable, "args": [str(TEST_SERVER), "stdio"]}}}
    tools.shutdown()

    again = Desk(qtbot, tmp_path)  # the next start, on the same data
    try:
        again.ctx.tools.restore()
        qtbot.waitUntil(lambda: again.ctx.tools.configs() != ())
        again_page = open_tools_settings(again)
        qtbot.waitUntil(lambda: _state(again_page, "test") == "ready · 6 tools", timeout=STARTS)
        assert again_page.limits["max_rounds"].value() == 7
    finally:
        again.ctx.tools.shutdown()
        again.close()


def test_screenshot_of_the_tools_page_with_a_ready_server(desk, tools, theme):
    from tests.support.gui_app import SCREENSHOTS

    _with_test_server(desk, tools)
    tools.allow_always(next(t for t in tools.tools() if t.name == "add"))  # as "Always for this tool" does
    tools.add(StdioServer("weather", sys.executable, ("-m", "mcp_server_weather")))  # not installed: it fails
    page = open_tools_settings(desk)
    desk.qtbot.waitUntil(lambda: _state(page, "weather").startswith("failed"), timeout=STARTS)
    _select(page, "test")
    desk.qtbot.waitUntil(lambda: len(_listed_tools(page)) == len(TEST_TOOLS))
    settings = desk.controllers.settings.window
    assert settings.width() >= settings.sizeHint().width()  # nothing cut at its opening size
    desk.qtbot.wait(50)  # the last frame's repaint before the grab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert settings.grab().save(str(SCREENSHOTS / f"settings-tools-{theme}.png"))
