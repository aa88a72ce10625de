"""Chat → Jobs… (ui/controllers/jobs.py, ui/widgets/jobs/): a job made in the New job
dialog from a CSV file (the preview first, a template naming a missing column refused),
run on the window's engine at spare priority, paused, resumed, cancelled, its failed items
retried, its results exported; a job a quit left running shows interrupted and resumes
without redoing a finished item. On the desk (a scripted engine), and once on the real model.
Screenshots: jobs-window-light.png and jobs-window-dark.png in the screenshots folder."""

from __future__ import annotations

import csv
import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.jobs import JobSpec, new_job
from app.jobs.inputs import csv_rows
from inference import SPARE_PRIORITY
from inference.outputs import FinishReason
from storage import ItemResult, JobRecord, JobsRepository
from tests.support.desk import ScriptedEngine
from tests.support.gui_app import SCREENSHOTS, WAIT_MS
from tests.support.window import menu_action
from ui.widgets.jobs.jobs_window import COLUMNS

PEOPLE = "name,city\nAda,London\nAlan,Wilmslow\nGrace,Arlington\nEdsger,Nuenen\nBarbara,Boston\nDonald,Milwaukee\n"


@pytest.fixture
def jobs_engine(desk):
    """The jobs' engine (the window's main one), scripted; every job stopped before the desk closes."""
    engine = ScriptedEngine(desk.streams)
    desk.controllers.jobs.client = engine
    yield engine
    desk.controllers.jobs.shutdown()  # a test that failed half-way: its threads end all the same


def stop_jobs(desk) -> None:
    """As the window quits: the jobs running pause; their ends are told to the window (pytest-qt
    closes the widgets before the fixtures' teardown, so each test ends its jobs itself)."""
    desk.controllers.jobs.shutdown()
    desk.qtbot.waitUntil(lambda: not desk.controllers.jobs.runs)
    desk.settled()


def open_jobs(desk):
    menu_action(desk.window, "Jobs…").trigger()
    jobs = desk.controllers.jobs
    desk.qtbot.waitUntil(lambda: jobs.window is not None and jobs.window.isVisible())
    return jobs.window


def fill_new_job(qtbot, jobs, window, path, template: str, max_tokens: int = 16):
    qtbot.mouseClick(window.buttons["new"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: jobs.dialog is not None and jobs.dialog.isVisible())
    dialog = jobs.dialog
    qtbot.keyClicks(dialog.path_edit, str(path))
    qtbot.keyClick(dialog.path_edit, Qt.Key.Key_Return)
    qtbot.keyClicks(dialog.template_edit, template)
    dialog.max_tokens.lineEdit().selectAll()
    qtbot.keyClicks(dialog.max_tokens, str(max_tokens))
    return dialog


def start_job(desk, path, rows: str, template: str, system: str = ""):
    """A job from the New job dialog over a CSV of rows, started; the Jobs window."""
    qtbot, jobs = desk.qtbot, desk.controllers.jobs
    path.write_text(rows, encoding="utf-8")
    window = open_jobs(desk)
    dialog = fill_new_job(qtbot, jobs, window, path, template)
    if system:
        qtbot.keyClicks(dialog.system_edit, system)
    qtbot.waitUntil(dialog.start_button.isEnabled)
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    return window


def row_of(window, job_id: str, *columns: str) -> list[str]:
    """The job's cells in these columns as shown (empty until the list has it)."""
    ids = [v.id for v in window.views]
    if job_id not in ids:
        return [""] * len(columns)
    return [window.table.item(ids.index(job_id), COLUMNS.index(c)).text() for c in columns]


def listed_job_id(qtbot, window) -> str:
    """The started job's id once the Jobs window lists it (its first items may reach the
    engine before the list is read back from storage)."""
    qtbot.waitUntil(lambda: bool(window.views))
    return window.views[0].id


def state_of(window, job_id: str) -> str:
    return row_of(window, job_id, "State")[0]


def test_a_job_from_the_dialog_runs_at_spare_priority_pauses_resumes_and_cancels(desk, jobs_engine, tmp_path):
    qtbot, jobs = desk.qtbot, desk.controllers.jobs
    people = tmp_path / "people.csv"
    people.write_text(PEOPLE, encoding="utf-8")
    window = open_jobs(desk)
    assert window.empty_label.isVisible() and not window.buttons["pause"].isEnabled()
    dialog = fill_new_job(qtbot, jobs, window, people, "Greet $name from $country.")
    qtbot.waitUntil(lambda: "Error: the template names a column this row lacks: country"
                    in dialog.preview_box.toPlainText())
    assert not dialog.start_button.isEnabled()
    for _ in range(len("$country.")):
        qtbot.keyClick(dialog.template_edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(dialog.template_edit, "$city.")
    qtbot.waitUntil(dialog.start_button.isEnabled)
    shown = dialog.preview_box.toPlainText()
    assert shown.startswith("6 rows; columns: name, city")
    assert "Greet Ada from London." in shown and "Greet Grace from Arlington." in shown
    assert "Edsger" not in shown  # the first three rows only
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 4)  # DEFAULT_WINDOW: the engine says no width
    assert all(chat.priority == SPARE_PRIORITY for chat in jobs_engine.chats)
    assert jobs_engine.chats[0].messages[-1]["content"] == "Greet Ada from London."
    assert jobs_engine.chats[0].sampling.max_tokens == 16
    job_id = listed_job_id(qtbot, window)
    qtbot.waitUntil(lambda: state_of(window, job_id) == "running")
    assert window.buttons["pause"].isEnabled() and not window.buttons["resume"].isEnabled()
    jobs_engine.write(jobs_engine.requests[0], "Hello, Ada!", tokens=3)
    jobs_engine.end(jobs_engine.requests[0])
    qtbot.waitUntil(lambda: row_of(window, job_id, "Progress") == ["1/6"])

    qtbot.mouseClick(window.buttons["pause"], Qt.MouseButton.LeftButton)  # its requests go back
    qtbot.waitUntil(lambda: state_of(window, job_id) == "paused", timeout=10_000)
    qtbot.waitUntil(lambda: f"Job {job_id} paused: 1 done, 0 failed, 5 pending"
                    in desk.window.statusBar().currentMessage())
    stored = JobsRepository(desk.repo.db)
    assert stored.counts(job_id) == {"pending": 5, "done": 1, "failed": 0}
    assert window.buttons["resume"].isEnabled() and not window.buttons["pause"].isEnabled()

    before = len(jobs_engine.requests)  # the first four and the one after Ada's
    qtbot.mouseClick(window.buttons["resume"], Qt.MouseButton.LeftButton)  # only the pending ones
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == before + 4)
    assert [c.messages[-1]["content"] for c in jobs_engine.chats[before:]] == [
        "Greet Alan from Wilmslow.", "Greet Grace from Arlington.", "Greet Edsger from Nuenen.",
        "Greet Barbara from Boston."]
    qtbot.waitUntil(lambda: state_of(window, job_id) == "running")
    qtbot.mouseClick(window.buttons["cancel"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: state_of(window, job_id) == "cancelled", timeout=10_000)
    assert stored.counts(job_id) == {"pending": 5, "done": 1, "failed": 0}
    assert stored.get(job_id).status == "cancelled"
    stop_jobs(desk)


def test_a_job_over_a_folder_attaches_each_file_to_its_items_prompt(desk, jobs_engine, tmp_path, monkeypatch):
    qtbot, jobs = desk.qtbot, desk.controllers.jobs
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "harbour.md").write_text("Boats came in before the storm.\n", encoding="utf-8")
    (folder / "lamp.txt").write_text("The keeper lit the lamp at dusk.\n", encoding="utf-8")
    window = open_jobs(desk)
    chosen: list = []
    monkeypatch.setattr("ui.widgets.jobs.new_job_dialog.open_folder_dialog",
                        lambda parent, caption, picked: chosen.append(caption) or picked(str(folder)))
    qtbot.mouseClick(window.buttons["new"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: jobs.dialog is not None and jobs.dialog.isVisible())
    dialog = jobs.dialog
    qtbot.mouseClick(dialog.folder_button, Qt.MouseButton.LeftButton)  # the folder chooser's answer
    assert chosen and dialog.path_edit.text() == str(folder)
    qtbot.keyClicks(dialog.template_edit, "Summarise $file.")
    qtbot.waitUntil(dialog.start_button.isEnabled)
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 2)
    by_prompt = {c.messages[-1]["content"]: c.messages[0]["content"] for c in jobs_engine.chats}
    assert set(by_prompt) == {"Summarise harbour.md.", "Summarise lamp.txt."}
    assert '<document name="lamp.txt">' in by_prompt["Summarise lamp.txt."]
    assert "lit the lamp at dusk" in by_prompt["Summarise lamp.txt."]
    assert "lamp" not in by_prompt["Summarise harbour.md."]  # each item its own file
    stop_jobs(desk)


def test_a_job_that_runs_to_its_end_asks_for_attention_unless_the_window_is_in_front(desk, jobs_engine, tmp_path,
                                                                                       monkeypatch):
    """The notification when a job ends (issue 37): the desktop's own way, the taskbar entry
    flashing (QApplication.alert), when neither the window nor its Jobs window is in front."""
    from PySide6.QtWidgets import QApplication

    qtbot = desk.qtbot
    alerts: list = []
    monkeypatch.setattr(QApplication, "alert", staticmethod(lambda widget, ms=0: alerts.append(widget)))
    elsewhere = [None]  # another application in front: Qt has no active window of ours
    monkeypatch.setattr(QApplication, "activeWindow", staticmethod(lambda: elsewhere[0]))
    window = open_jobs(desk)
    for asked, (front, expected) in enumerate(((None, [desk.window]), (window, [])), 1):
        alerts.clear()
        elsewhere[0] = front
        start_job(desk, tmp_path / "people.csv", "name\nAda\n", "Say hi to $name.")
        qtbot.waitUntil(lambda asked=asked: len(jobs_engine.requests) == asked)
        request_id = jobs_engine.requests[-1]
        jobs_engine.write(request_id, "Hi Ada", tokens=2)
        jobs_engine.end(request_id)
        qtbot.waitUntil(lambda: "completed: 1 done" in desk.window.statusBar().currentMessage(), timeout=10_000)
        assert alerts == expected
        desk.window.statusBar().clearMessage()
    stop_jobs(desk)


def test_an_answer_opens_as_a_chat_to_go_on_from(desk, jobs_engine, tmp_path):
    qtbot = desk.qtbot
    window = start_job(desk, tmp_path / "people.csv", "name\nAda\nAlan\n", "Say hi to $name.", system="Be warm.")
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 2)
    job_id = listed_job_id(qtbot, window)
    for request_id, answer in zip(jobs_engine.requests, ("Hi Ada!", "Hello Alan.")):
        jobs_engine.write(request_id, answer, tokens=2)
        jobs_engine.end(request_id)
    qtbot.waitUntil(lambda: state_of(window, job_id) == "completed", timeout=10_000)
    table = window.answers_table
    qtbot.waitUntil(lambda: table.rowCount() == 2)
    assert [table.item(1, c).text() for c in range(3)] == ["2", "name=Alan", "Hello Alan."]
    assert window.item_tabs.tabText(0) == "Answers (2)"
    table.setFocus()
    table.setCurrentCell(1, 2)
    qtbot.keyClick(table, Qt.Key.Key_Return)  # Enter opens the answer as a chat
    def chat():
        return next((c for c in desk.repo.list_conversations() if c.title == "people.csv · row 2"), None)

    # In a tab, to go on from it: the tab opens once the chat is stored whole.
    qtbot.waitUntil(lambda: chat() is not None and desk.window.tab_for(chat().id) is not None)
    conv = chat()
    path = desk.repo.active_path(conv.id).messages
    assert [(m.role, m.content) for m in path] == [("system", "Be warm."), ("user", "Say hi to Alan."),
                                                  ("assistant", "Hello Alan.")]
    stop_jobs(desk)


def test_the_answers_come_in_while_the_job_runs_and_the_one_the_user_is_on_stays_current(desk, jobs_engine, tmp_path):
    qtbot = desk.qtbot
    window = start_job(desk, tmp_path / "people.csv", "name\nAda\nAlan\nGrace\n", "Say hi to $name.")
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 3)
    job_id = listed_job_id(qtbot, window)
    table = window.answers_table
    ada, alan, grace = jobs_engine.requests
    jobs_engine.write(alan, "Hello Alan.", tokens=2)
    jobs_engine.end(alan)
    qtbot.waitUntil(lambda: table.rowCount() == 1, timeout=10_000)  # listed while the job runs
    assert state_of(window, job_id) == "running" and table.item(0, 2).text() == "Hello Alan."
    table.setFocus()
    table.setCurrentCell(0, 2)
    jobs_engine.write(ada, "Hi Ada!", tokens=2)
    jobs_engine.end(ada)
    qtbot.waitUntil(lambda: table.rowCount() == 2, timeout=10_000)
    assert [table.item(r, 2).text() for r in range(2)] == ["Hi Ada!", "Hello Alan."]
    assert table.currentRow() == 1  # still on Alan's answer, moved down by Ada's
    qtbot.keyClick(table, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: any(c.title == "people.csv · row 2" for c in desk.repo.list_conversations()))
    jobs_engine.write(grace, "Hey Grace.", tokens=2)
    jobs_engine.end(grace)
    qtbot.waitUntil(lambda: table.rowCount() == 3 and state_of(window, job_id) == "completed", timeout=10_000)
    stop_jobs(desk)


def test_failed_items_are_listed_retried_and_the_results_exported(desk, jobs_engine, tmp_path):
    qtbot = desk.qtbot
    people = tmp_path / "people.csv"
    window = start_job(desk, people, "name\nAda\nAlan\nGrace\n", "Say hi to $name.")
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 3)
    job_id = jobs_engine.requests[0].split("-")[1]
    for request_id, answer in zip(jobs_engine.requests, ("Hi Ada", None, "Hi Grace")):
        if answer is None:
            jobs_engine.end(request_id, FinishReason.ERROR)
        else:
            jobs_engine.write(request_id, answer, tokens=2)
            jobs_engine.end(request_id)
    qtbot.waitUntil(lambda: state_of(window, job_id) == "completed", timeout=10_000)
    qtbot.waitUntil(lambda: f"Job {job_id} completed: 2 done, 1 failed" in desk.window.statusBar().currentMessage())
    shown = row_of(window, job_id, "Job", "Input", "State", "Progress")
    assert shown == [job_id, "people.csv", "completed", "3/3 · 1 failed"]
    qtbot.waitUntil(lambda: window.failed_table.rowCount() == 1)
    assert [window.failed_table.item(0, c).text() for c in range(3)] == ["2", "name=Alan", "error"]

    qtbot.mouseClick(window.buttons["retry"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 4)
    assert jobs_engine.chats[3].messages[-1]["content"] == "Say hi to Alan."
    jobs_engine.write(jobs_engine.requests[3], "Hi Alan", tokens=2)
    jobs_engine.end(jobs_engine.requests[3])
    qtbot.waitUntil(lambda: row_of(window, job_id, "State", "Progress") == ["completed", "3/3"], timeout=10_000)
    qtbot.waitUntil(lambda: window.failed_table.rowCount() == 0)

    target = tmp_path / "greetings.csv"  # .csv: the fields as columns
    qtbot.mouseClick(window.buttons["export"], Qt.MouseButton.LeftButton)
    file_dialog = next(d for d in window.findChildren(QFileDialog) if d.isVisible())
    file_dialog.selectFile(str(target))
    file_dialog.accept()
    qtbot.waitUntil(lambda: "Exported 3 rows" in desk.window.statusBar().currentMessage())
    with target.open(encoding="utf-8") as exported:
        rows = list(csv.DictReader(exported))
    assert [(r["name"], r["state"], r["answer"]) for r in rows] == [
        ("Ada", "done", "Hi Ada"), ("Alan", "done", "Hi Alan"), ("Grace", "done", "Hi Grace")]
    stop_jobs(desk)


def test_a_job_a_quit_left_running_shows_interrupted_and_resumes_only_what_is_pending(desk, jobs_engine):
    qtbot = desk.qtbot
    stored = JobsRepository(desk.repo.db)
    job = new_job(stored, csv_rows("n\n1\n2\n3\n"), JobSpec(template="Count to $n."), source="numbers.csv")
    first = stored.pending(job.id)[0]
    stored.finish(first.id, ItemResult(answer="1", finish_reason="stop"))
    stored.set_status(job.id, "running")  # as a kill leaves it
    window = open_jobs(desk)
    qtbot.waitUntil(lambda: state_of(window, job.id) == "interrupted")
    assert window.buttons["resume"].isEnabled()
    qtbot.mouseClick(window.buttons["resume"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 2)
    assert [c.messages[-1]["content"] for c in jobs_engine.chats] == ["Count to 2.", "Count to 3."]
    for request_id in list(jobs_engine.requests):
        jobs_engine.write(request_id, "ok")
        jobs_engine.end(request_id)
    qtbot.waitUntil(lambda: state_of(window, job.id) == "completed", timeout=10_000)
    assert [i.answer for i in stored.items(job.id)] == ["1", "ok", "ok"]
    stop_jobs(desk)


def _running_with_one_done(desk, jobs_engine):
    """A 5-item job started in the window, 4 items in flight, the first one answered."""
    stored = JobsRepository(desk.repo.db)
    job = new_job(stored, csv_rows("n\n1\n2\n3\n4\n5\n"), JobSpec(template="Count to $n."), source="n.csv")
    window = open_jobs(desk)
    desk.controllers.jobs.start(job.id)
    desk.qtbot.waitUntil(lambda: len(jobs_engine.requests) == 4)
    jobs_engine.write(jobs_engine.requests[0], "1")
    jobs_engine.end(jobs_engine.requests[0])
    desk.qtbot.waitUntil(lambda: row_of(window, job.id, "Progress") == ["1/5"])
    return job, window, stored


def test_quitting_pauses_a_running_job_and_keeps_its_finished_items(desk, jobs_engine):
    qtbot, jobs = desk.qtbot, desk.controllers.jobs
    job, window, stored = _running_with_one_done(desk, jobs_engine)
    jobs.shutdown()  # as Controllers.shutdown does, before the engines stop
    assert stored.get(job.id).status == "paused"
    assert stored.counts(job.id) == {"pending": 4, "done": 1, "failed": 0}
    stop_jobs(desk)
    qtbot.waitUntil(lambda: state_of(window, job.id) == "paused" and window.buttons["resume"].isEnabled())


def test_a_json_schema_in_the_new_job_form_is_checked_stored_applied_and_each_answer_validated(
        desk, jobs_engine, tmp_path):
    qtbot, jobs, stored = desk.qtbot, desk.controllers.jobs, JobsRepository(desk.repo.db)
    people = tmp_path / "people.csv"
    people.write_text("name\nAda\nAlan\n", encoding="utf-8")
    person = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    schema_file = tmp_path / "person.schema.json"
    schema_file.write_text(json.dumps(person), encoding="utf-8")
    window = open_jobs(desk)
    dialog = fill_new_job(qtbot, jobs, window, people, "Describe $name as JSON.")
    qtbot.waitUntil(dialog.start_button.isEnabled)
    qtbot.keyClicks(dialog.schema_edit, '{"type": "object", "properties": {"age": {"not": {"type": "string"}}}}')
    qtbot.waitUntil(lambda: dialog.preview_box.toPlainText() == (
        "The JSON Schema cannot be enforced: json_schema.properties.age uses 'not', which is not supported: "
        "no grammar can enforce it"))  # the server's words for response_format's json_schema
    assert not dialog.start_button.isEnabled()

    qtbot.mouseClick(dialog.schema_button, Qt.MouseButton.LeftButton)  # Load…: the file replaces the text
    file_dialog = next(d for d in dialog.findChildren(QFileDialog) if d.isVisible())
    file_dialog.selectFile(str(schema_file))
    file_dialog.accept()
    qtbot.waitUntil(lambda: json.loads(dialog.schema_edit.toPlainText() or "null") == person)
    qtbot.waitUntil(dialog.start_button.isEnabled)
    shown = dialog.preview_box.toPlainText()
    assert "Answers follow this JSON Schema (each one checked against it):" in shown
    assert '"required": ["name", "age"]' in shown and "Describe Ada as JSON." in shown
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert dialog.grab().save(str(SCREENSHOTS / "new-job-schema.png"))
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 2)
    job_id = jobs_engine.requests[0].split("-")[1]
    assert stored.get(job_id).spec["json_schema"] == person
    grammars = {chat.sampling.grammar for chat in jobs_engine.chats}
    assert len(grammars) == 1 and None not in grammars  # every item's request follows the schema
    jobs_engine.write(jobs_engine.requests[0], '{"name": "Ada", "age": 36}', tokens=8)
    jobs_engine.end(jobs_engine.requests[0])
    jobs_engine.write(jobs_engine.requests[1], '{"name": "Alan", "a', tokens=16)
    jobs_engine.end(jobs_engine.requests[1], FinishReason.LENGTH)  # cut by max tokens: not whole JSON
    qtbot.waitUntil(lambda: row_of(window, job_id, "State", "Progress") == ["completed", "2/2 · 1 failed"],
                    timeout=10_000)
    qtbot.waitUntil(lambda: window.failed_table.rowCount() == 1)
    assert window.failed_table.item(0, 0).text() == "2"
    assert window.failed_table.item(0, 2).text().startswith("the answer is not JSON (")
    assert [(i.state, i.answer) for i in stored.items(job_id)] == [
        ("done", '{"name": "Ada", "age": 36}'), ("failed", '{"name": "Alan", "a')]
    stop_jobs(desk)


def answer_delete_box(qtbot, window, button: QMessageBox.StandardButton) -> None:
    qtbot.waitUntil(lambda: window.delete_box is not None and window.delete_box.isVisible())
    qtbot.mouseClick(window.delete_box.button(button), Qt.MouseButton.LeftButton)


def test_the_delete_key_deletes_the_selected_job_after_asking(desk, jobs_engine):
    qtbot, stored = desk.qtbot, JobsRepository(desk.repo.db)
    spec = JobSpec(template="Count to $n.")
    kept = new_job(stored, csv_rows("n\n1\n"), spec, source="kept.csv")
    done = new_job(stored, csv_rows("n\n1\n2\n"), spec, source="done.csv")
    for item in stored.pending(done.id):
        stored.finish(item.id, ItemResult(answer="ok", finish_reason="stop"))
    stored.set_status(done.id, "completed")
    window = open_jobs(desk)
    qtbot.waitUntil(lambda: [v.id for v in window.views] == [done.id, kept.id])  # newest first, selected
    assert window.buttons["delete"].isEnabled()
    window.table.setFocus()
    qtbot.keyClick(window.table, Qt.Key.Key_Delete)
    assert f"Delete job {done.id} (done.csv) with its 2 items" in window.delete_box.text()
    answer_delete_box(qtbot, window, QMessageBox.StandardButton.No)  # asked, and kept
    qtbot.waitUntil(lambda: window.delete_box is None)
    desk.settled()
    assert stored.get(done.id) is not None and len(window.views) == 2

    first = window.table.visualItemRect(window.table.item(0, 0)).center()
    qtbot.mouseClick(window.table.viewport(), Qt.MouseButton.LeftButton, pos=first)  # back to the list
    qtbot.keyClick(window.table, Qt.Key.Key_Delete)
    answer_delete_box(qtbot, window, QMessageBox.StandardButton.Yes)
    qtbot.waitUntil(lambda: [v.id for v in window.views] == [kept.id])
    assert stored.get(done.id) is None and stored.items(done.id) == []
    assert f"Deleted job {done.id}" in desk.window.statusBar().currentMessage()
    assert len(stored.items(kept.id)) == 1
    stop_jobs(desk)


def test_deleting_a_running_job_cancels_it_first_and_no_result_lands_after(desk, jobs_engine):
    qtbot, jobs = desk.qtbot, desk.controllers.jobs
    job, window, stored = _running_with_one_done(desk, jobs_engine)
    qtbot.mouseClick(window.buttons["delete"], Qt.MouseButton.LeftButton)
    assert "It is running: it is cancelled first, then deleted." in window.delete_box.text()
    answer_delete_box(qtbot, window, QMessageBox.StandardButton.Yes)
    qtbot.waitUntil(lambda: not window.views and not jobs.runs, timeout=10_000)
    assert window.empty_label.isVisible()
    assert stored.get(job.id) is None and stored.items(job.id) == []
    qtbot.waitUntil(lambda: f"Deleted job {job.id}" in desk.window.statusBar().currentMessage())
    asked = len(jobs_engine.requests)  # the runner stopped: nothing more was asked of the engine
    desk.settled()
    assert len(jobs_engine.requests) == asked
    stop_jobs(desk)


def test_a_server_batch_still_running_cannot_be_deleted_from_the_window(desk, jobs_engine):
    qtbot, stored = desk.qtbot, JobsRepository(desk.repo.db)
    stored.create(JobRecord(id="batch_1", kind="openai", status="running",
                            spec={"status": "in_progress", "input_file_id": "file-x"}, source="in.jsonl"), [])
    window = open_jobs(desk)
    qtbot.waitUntil(lambda: [v.id for v in window.views] == ["batch_1"])
    assert not window.buttons["delete"].isEnabled()
    window.table.setFocus()
    qtbot.keyClick(window.table, Qt.Key.Key_Delete)
    assert window.delete_box is None and stored.get("batch_1") is not None
    stop_jobs(desk)


def test_a_model_switch_pauses_a_running_job_which_resumes_on_its_own_model_only(desk, jobs_engine, tmp_path,
                                                                                  monkeypatch):
    """Before: the job went on with the next model, and the items the engine's restart cut
    were stored as failed; one job's answers came from two models."""
    qtbot, jobs, hub = desk.qtbot, desk.controllers.jobs, desk.ctx.engines
    mine = hub.local_settings.model_path

    def restart(wait=True, settings=None):  # the engine process restarting on another model
        for request_id in list(jobs_engine.sinks):  # fails what it still holds, as EngineProcess does
            jobs_engine.end(request_id, FinishReason.ERROR)
        restarts.append(settings.model_path)

    restarts: list = []
    monkeypatch.setattr(hub._local, "restart", restart)
    people = tmp_path / "people.csv"
    people.write_text(PEOPLE, encoding="utf-8")
    window = open_jobs(desk)
    dialog = fill_new_job(qtbot, jobs, window, people, "Greet $name.")
    qtbot.waitUntil(dialog.start_button.isEnabled)
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 4)
    job_id = listed_job_id(qtbot, window)
    qtbot.waitUntil(lambda: row_of(window, job_id, "Model", "State") == [mine.name, "running"])
    jobs_engine.write(jobs_engine.requests[0], "Hello, Ada!", tokens=3)
    jobs_engine.end(jobs_engine.requests[0])
    qtbot.waitUntil(lambda: row_of(window, job_id, "Progress") == ["1/6"])

    other = tmp_path / "other.gguf"
    desk.window.model_requested.emit(str(other))  # the model picker's choice
    qtbot.waitUntil(lambda: hub.local_settings.model_path == other, timeout=10_000)
    qtbot.waitUntil(lambda: state_of(window, job_id) == "paused", timeout=10_000)
    stored = JobsRepository(desk.repo.db)
    assert stored.counts(job_id) == {"pending": 5, "done": 1, "failed": 0}, "nothing cut is stored as failed"

    asked = len(jobs_engine.requests)
    qtbot.mouseClick(window.buttons["resume"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: f"Job {job_id} runs on {mine.name}: load that model to resume it"
                    in desk.window.statusBar().currentMessage())
    assert len(jobs_engine.requests) == asked and state_of(window, job_id) == "paused"

    desk.window.model_requested.emit(str(mine))  # its own model again
    qtbot.waitUntil(lambda: hub.local_settings.model_path == mine, timeout=10_000)
    qtbot.mouseClick(window.buttons["resume"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == asked + 4)
    assert restarts == [other, mine]
    stop_jobs(desk)


def test_a_model_switch_pauses_the_servers_batches_before_the_engine_restarts(desk, monkeypatch, tmp_path):
    """The window's server is told before the engine restarts (its batches pause; their
    next request would meet the new model) and, once the load ended, which model it serves
    (the batches of that model go on). The server's side: test_batch_api.py's model switch."""
    qtbot, hub, server = desk.qtbot, desk.ctx.engines, desk.controllers.server.server
    told: list = []
    monkeypatch.setattr(hub._local, "restart", lambda wait=True, settings=None: told.append("restart"))
    monkeypatch.setattr(server, "model_changing", lambda: told.append("changing"))
    monkeypatch.setattr(server, "model_settled", lambda name: told.append(("settled", name)))
    other = tmp_path / "other.gguf"
    desk.window.model_requested.emit(str(other))  # the model picker's choice
    qtbot.waitUntil(lambda: ("settled", "other") in told, timeout=10_000)
    assert told == ["changing", "restart", ("settled", "other")]


def test_two_jobs_at_once_share_the_engines_width_but_one(desk, jobs_engine):
    """Before, each job took the width but one (four here, where the engine does not say its
    width): two at once had eight items in the engine and took the chat's sequence."""
    qtbot, jobs = desk.qtbot, desk.controllers.jobs
    stored = JobsRepository(desk.repo.db)
    spec = JobSpec(template="Say hello to $name.", model=str(desk.ctx.engines.local_settings.model_path))
    made = [new_job(stored, csv_rows(PEOPLE), spec, source=f"{name}.csv") for name in ("first", "second")]
    window = open_jobs(desk)
    qtbot.waitUntil(lambda: len(window.views) == 2)
    for job in made:
        jobs.start(job.id)
    qtbot.waitUntil(lambda: all(state_of(window, job.id) == "running" for job in made), timeout=10_000)
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 4)
    jobs_engine.write(jobs_engine.requests[0], "Hello!")
    jobs_engine.end(jobs_engine.requests[0])
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 5)  # one ended, one more: four in flight
    assert desk.ctx.job_slots.taken == 4
    stop_jobs(desk)


def test_screenshot_of_the_jobs_window(desk, jobs_engine, theme):
    qtbot = desk.qtbot
    stored = JobsRepository(desk.repo.db)
    spec = JobSpec(template="Write a one-line greeting for $name from $city.", sampling={"max_tokens": 64},
                   model=str(desk.ctx.engines.local_settings.model_path))  # the window's: it may run
    done = new_job(stored, csv_rows(PEOPLE), spec, source="people.csv")
    for item in stored.pending(done.id):
        stored.finish(item.id, ItemResult(answer="Hello!", finish_reason="stop"))
    stored.set_status(done.id, "completed")
    cut = new_job(stored, csv_rows("name,city\nAda,London\nAlan\nGrace,Arlington\n"), spec, source="guests.csv")
    stored.set_status(cut.id, "running")  # a quit cut it
    customers = PEOPLE + "".join(PEOPLE.split("\n", 1)[1] for _ in range(3))  # 24 rows
    running = new_job(stored, csv_rows(customers), spec, source="customers.csv")
    window = open_jobs(desk)
    qtbot.waitUntil(lambda: len(window.views) == 3)
    desk.controllers.jobs.start(running.id)
    qtbot.waitUntil(lambda: len(jobs_engine.requests) == 4)
    for n in range(6):  # finishes, a little apart, so the rate and the time left show
        request_id = jobs_engine.requests[n]
        jobs_engine.write(request_id, "Hello!")
        jobs_engine.end(request_id)
        qtbot.waitUntil(lambda n=n: len(jobs_engine.requests) >= n + 5)
        qtbot.wait(120)
    qtbot.waitUntil(lambda: row_of(window, running.id, "Rate")[0].endswith("items/min"), timeout=10_000)
    window.table.selectRow([v.id for v in window.views].index(cut.id))
    qtbot.waitUntil(lambda: window.failed_table.rowCount() == 1)
    window.table.selectRow(0)
    qtbot.waitUntil(lambda: "left" in window.detail_label.text() and window.failed_label.text().endswith("none"),
                    timeout=10_000)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert window.grab().save(str(SCREENSHOTS / f"jobs-window-{theme}.png"))
    stop_jobs(desk)


@pytest.mark.model
def test_a_small_job_runs_on_the_real_model_and_is_exported(app, tmp_path):
    qtbot, jobs = app.qtbot, app.controllers.jobs
    people = tmp_path / "people.csv"
    people.write_text("name,city\nAda,London\nAlan,Wilmslow\nGrace,Arlington\nEdsger,Nuenen\n", encoding="utf-8")
    window = open_jobs(app)
    dialog = fill_new_job(qtbot, jobs, window, people, "Write a one-line greeting for $name from $city.",
                          max_tokens=8)
    qtbot.waitUntil(dialog.start_button.isEnabled)
    qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(window.views) and window.views[0].state == "completed", timeout=WAIT_MS)
    job_id = listed_job_id(qtbot, window)
    assert row_of(window, job_id, "Progress") == ["4/4"]
    target = tmp_path / "greetings.jsonl"
    qtbot.mouseClick(window.buttons["export"], Qt.MouseButton.LeftButton)
    file_dialog = next(d for d in window.findChildren(QFileDialog) if d.isVisible())
    file_dialog.selectFile(str(target))
    file_dialog.accept()
    qtbot.waitUntil(lambda: "Exported 4 rows" in app.window.statusBar().currentMessage())
    rows = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert [r["fields"]["name"] for r in rows] == ["Ada", "Alan", "Grace", "Edsger"]
    assert all(r["state"] == "done" and r["answer"] and 0 < r["completion_tokens"] <= 8 for r in rows)


def start_counting_job(app, tmp_path, items: int):
    """A job of `items` lines of 32 tokens each, started from the New job dialog; its window."""
    numbers = tmp_path / "numbers.jsonl"
    numbers.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(items)), encoding="utf-8")
    window = open_jobs(app)
    dialog = fill_new_job(app.qtbot, app.controllers.jobs, window, numbers, "Count from $n upwards.", max_tokens=32)
    app.qtbot.waitUntil(dialog.start_button.isEnabled)
    app.qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    return window


@pytest.mark.model
def test_a_chat_sent_while_a_job_runs_goes_first(app, tmp_path):
    """The job's items run at spare priority: a chat sent meanwhile is being written while the
    job still has items to run (judged when the reply starts: the job's spare rows go on
    beside the chat, so by the reply's end the job may well have finished)."""
    qtbot = app.qtbot
    window = start_counting_job(app, tmp_path, 24)
    qtbot.waitUntil(lambda: bool(window.views) and window.views[0].running and window.views[0].finished >= 1,
                    timeout=WAIT_MS)
    tab = app.new_tab()
    app.send(tab, "Name three colours.")
    app.wait_streaming(tab)
    shown = window.views[0]
    assert shown.finished < shown.total, "the chat waited for the job"
    app.wait_done(tab)
    assert app.last(tab).status == "complete"
    qtbot.waitUntil(lambda: window.views[0].state == "completed", timeout=WAIT_MS)
    assert window.views[0].progress_text() == "24/24"


@pytest.mark.model
def test_the_performance_panel_shows_the_chat_and_the_job_as_lanes(app, tmp_path):
    """Who uses the engine: a job started from its dialog and a chat sent in a tab meanwhile
    are a lane each in the performance panel (the engine's own snapshots, through its process)."""
    qtbot = app.qtbot
    panel = app.window.perf_panel
    panel.show()
    window = start_counting_job(app, tmp_path, 24)
    qtbot.waitUntil(lambda: bool(window.views) and window.views[0].running, timeout=WAIT_MS)
    job_id = listed_job_id(qtbot, window)
    qtbot.waitUntil(lambda: any(row[:2] == ("job", job_id) and row[3] != "0" for row in panel.lanes.rows()),
                    timeout=WAIT_MS)
    tab = app.new_tab()
    app.send(tab, "Name three colours.")
    qtbot.waitUntil(lambda: {row[0] for row in panel.lanes.rows()} >= {"chat", "job"}, timeout=WAIT_MS)
    chat, job = panel.lanes.rows()[:2]  # the tabs' lanes first
    # named by the chat's title (the stand-in from its first message) or, untitled, its id
    assert chat[0] == "chat" and ("Name three" in chat[1] or chat[1] == str(tab.conversation_id)), chat
    assert job[:2] == ("job", job_id)
    app.wait_done(tab)
    stop_jobs(app)
