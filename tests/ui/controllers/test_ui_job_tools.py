"""Jobs → New job… with tools (ui/widgets/jobs/new_job_dialog.py, app/jobs/tools.py): the
window's MCP servers are offered, one is checked with the keyboard and a first call required;
the preview says every call runs without asking; each item's loop calls the server (the
SDK-made test server over HTTP, started for the job by its own manager), its result read by
the next turn, and the exchange stored beside the answer. On the desk (a scripted engine
writes the model's turns)."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt

from app.jobs import JobTools
from app.tools import HttpServer
from storage import JobsRepository
from tests.support.gui_app import SCREENSHOTS
from tests.ui.controllers.test_ui_jobs import fill_new_job, jobs_engine, open_jobs, row_of, stop_jobs

__all__ = ["jobs_engine"]  # the fixture, shared with the jobs' tests

ADD_CALL = '{"name": "add", "arguments": {"a": 2, "b": 3}}'


def test_a_job_with_a_checked_server_calls_its_tool_for_every_item(desk, jobs_engine, tmp_path, shared_mcp_url):
    qtbot, jobs, stored = desk.qtbot, desk.controllers.jobs, JobsRepository(desk.repo.db)
    desk.ctx.tools.add(HttpServer("test", shared_mcp_url))
    sums = tmp_path / "sums.csv"
    sums.write_text("a,b\n2,3\n", encoding="utf-8")
    window = open_jobs(desk)
    dialog = fill_new_job(qtbot, jobs, window, sums, "What is $a plus $b?")
    qtbot.waitUntil(dialog.start_button.isEnabled)
    assert [dialog.tools_list.item(i).text() for i in range(dialog.tools_list.count())] == [
        "test", "Web tools (fetch, web_search)"]
    assert dialog.chosen_tools() is None  # nothing checked: a job without tools

    dialog.tools_list.setFocus()
    dialog.tools_list.setCurrentRow(0)
    qtbot.keyClick(dialog.tools_list, Qt.Key.Key_Space)  # checks "test"
    dialog.tools_required.setFocus()
    qtbot.keyClick(dialog.tools_required, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: "Each item's first turn must call one of: test" in dialog.preview_box.toPlainText())
    assert "Every call runs without asking" in dialog.preview_box.toPlainText()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert dialog.grab().save(str(SCREENSHOTS / "new-job-tools.png"))
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)

    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 1, timeout=20_000)  # after the job's server connected
    job_id = jobs_engine.requests[0].split("-")[1]
    tools = JobTools.from_json(stored.get(job_id).spec["tools"])
    assert tools.choice == "required" and [s.name for s in tools.servers()] == ["test"] and tools.web is None
    first = jobs_engine.chats[0]
    assert first.sampling.grammar is not None and '"name": "add"' in first.messages[0]["content"]
    jobs_engine.write(jobs_engine.requests[0], ADD_CALL, tokens=5)
    jobs_engine.end(jobs_engine.requests[0])
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 2, timeout=20_000)  # the call ran: the next turn
    assert "The result of add" in jobs_engine.chats[1].messages[-1]["content"]
    assert "5" in jobs_engine.chats[1].messages[-1]["content"]
    jobs_engine.write(jobs_engine.requests[1], "2 plus 3 is 5.", tokens=6)
    jobs_engine.end(jobs_engine.requests[1])
    qtbot.waitUntil(lambda: row_of(window, job_id, "State", "Progress") == ["completed", "1/1"], timeout=10_000)

    item = stored.items(job_id)[0]
    assert item.answer == "2 plus 3 is 5."  # (the scripted engine reports no token counts)
    call_turn, result, answer = item.exchange
    assert json.loads(call_turn["tool_calls"][0]["function"]["arguments"]) == {"a": 2, "b": 3}
    assert result["role"] == "tool" and result["content"] == "5"
    assert answer == {"role": "assistant", "content": "2 plus 3 is 5."}

    table = window.answers_table  # Enter on the answer: a chat with the item's tool round in it
    qtbot.waitUntil(lambda: table.rowCount() == 1)
    table.setFocus()
    table.setCurrentCell(0, 2)
    qtbot.keyClick(table, Qt.Key.Key_Return)

    def chat():
        return next((c for c in desk.repo.list_conversations() if c.title == "sums.csv · row 1"), None)

    qtbot.waitUntil(lambda: chat() is not None and desk.window.tab_for(chat().id) is not None)
    path = desk.repo.active_path(chat().id).messages
    assert [(m.role, m.content) for m in path] == [("user", "What is 2 plus 3?"), ("assistant", ""),
                                                  ("tool", "5"), ("assistant", "2 plus 3 is 5.")]
    assert [(c.name, json.loads(c.arguments)) for c in path[1].tool_calls] == [("add", {"a": 2, "b": 3})]
    assert path[2].tool_result.call_id == path[1].tool_calls[0].id and path[2].tool_result.name == "add"
    tab = desk.window.tab_for(chat().id)
    qtbot.waitUntil(lambda: tab.model.rowCount() >= 3)
    assert desk.window.grab().save(str(SCREENSHOTS / "job-tools-as-chat.png"))
    stop_jobs(desk)
    desk.ctx.tools.shutdown()
