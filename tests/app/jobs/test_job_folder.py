"""A job over every file of a folder (issue 37): one item a file, its text attached to the
prompt when the item runs, a file Chorus cannot read failing alone with its reason."""

from __future__ import annotations

import json

import pytest

from app.jobs import InputError, JobSpec, TemplateWork, read_rows
from app.jobs.spec import DOCUMENT
from storage import ItemRecord, ItemResult
from tests.support.cli import chorus_in_process


def folder_of(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "b-lighthouse.md").write_text("# Lighthouse\n\nThe keeper lit the lamp at dusk.\n", encoding="utf-8")
    (folder / "a-harbour.txt").write_text("Boats came in before the storm.\n", encoding="utf-8")
    (folder / "c-data.xyz").write_bytes(b"\x00\x01 binary")
    (folder / ".hidden.md").write_text("never", encoding="utf-8")
    (folder / "sub").mkdir()
    (folder / "sub" / "deeper.md").write_text("not this one", encoding="utf-8")
    return folder


def item(fields: dict, seq: int = 0) -> ItemRecord:
    return ItemRecord(id=seq + 1, job_id="job_1", seq=seq, custom_id=None, fields=fields, state="pending")


def test_a_folder_is_one_item_a_file_by_name_hidden_files_and_subfolders_left_out(tmp_path):
    folder = folder_of(tmp_path)
    rows = read_rows(folder)
    assert [r.fields["file"] for r in rows] == ["a-harbour.txt", "b-lighthouse.md", "c-data.xyz"]
    assert rows[1].fields[DOCUMENT] == str((folder / "b-lighthouse.md").resolve())
    assert all(r.error is None for r in rows)  # what cannot be read fails when it runs, alone
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no file"):
        read_rows(tmp_path / "empty")


def test_each_items_file_is_attached_after_the_system_prompt_and_an_unreadable_one_fails_alone(tmp_path):
    rows = read_rows(folder_of(tmp_path))
    work = TemplateWork(JobSpec(template="Summarise $file in one line.", system_prompt="Be brief."))
    run = work.start(item(rows[1].fields, 1), "r1")
    (chat,) = run.requests
    system, user = chat.messages
    assert system["content"].startswith("Be brief.\n\n")  # the shared prefix first
    assert '<document name="b-lighthouse.md">' in system["content"] and "lit the lamp at dusk" in system["content"]
    assert user["content"] == "Summarise b-lighthouse.md in one line."
    failed = work.start(item(rows[2].fields, 2), "r2")
    assert isinstance(failed, ItemResult) and "c-data.xyz: Chorus cannot read this type .xyz" in failed.error
    (tmp_path / "notes" / "a-harbour.txt").unlink()  # gone since the job was made
    gone = work.start(item(rows[0].fields, 0), "r0")
    assert isinstance(gone, ItemResult) and "a-harbour.txt" in gone.error


@pytest.mark.model
def test_chorus_batch_run_over_a_folder_answers_each_file_and_lists_the_one_it_cannot_read(model_path, tmp_path,
                                                                                           capsys):
    folder = folder_of(tmp_path)
    out = tmp_path / "out.jsonl"
    said = chorus_in_process(capsys, tmp_path, "batch", "run", str(folder), "--prompt", "Summarise $file.",
                             "--max-tokens", "8", "--model", str(model_path), "--out", str(out), "--json")
    assert said.returncode == 0, said.stderr
    counts = json.loads(said.stdout.strip().splitlines()[-1])
    assert (counts["done"], counts["failed"]) == (2, 1)
    results = {r["fields"]["file"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert results["c-data.xyz"]["state"] == "failed" and "cannot read this type" in results["c-data.xyz"]["error"]
    for name in ("a-harbour.txt", "b-lighthouse.md"):
        assert results[name]["state"] == "done" and results[name]["answer"]
        assert results[name]["prompt_tokens"] > 30  # the template alone is a dozen tokens: the file went in


def test_a_folder_items_answer_opens_as_a_chat_with_its_file_attached_to_the_question(tmp_path, repo):
    from app.jobs import NotAChat, item_chat
    from storage import JobRecord

    rows = read_rows(folder_of(tmp_path))
    spec = JobSpec(template="Summarise $file.", model="/models/SmolLM2.gguf")
    job = JobRecord(id="job_1", kind="template", status="completed", spec=spec.to_json(), source="notes")
    done = ItemRecord(id=2, job_id="job_1", seq=1, custom_id=None, fields=rows[1].fields, state="done",
                      answer="A keeper lights a lamp.")
    conv_id = item_chat(repo, job, done)
    path = repo.active_path(conv_id)
    assert path.conversation.title == "notes · row 2" and path.conversation.model_ref == "SmolLM2.gguf"
    question, answer = path.messages
    assert (question.role, question.content, answer.role, answer.content) == (
        "user", "Summarise b-lighthouse.md.", "assistant", "A keeper lights a lamp.")
    assert [a.name for a in path.attachments[question.id]] == ["b-lighthouse.md"]
    with pytest.raises(NotAChat, match="no answer"):
        item_chat(repo, job, ItemRecord(id=3, job_id="job_1", seq=2, custom_id=None, fields={}, state="failed"))
    batch = JobRecord(id="batch_1", kind="openai", status="completed", spec={}, source="in.jsonl")
    with pytest.raises(NotAChat, match="output file"):
        item_chat(repo, batch, done)
