"""`chorus batch delete ID` on a real data folder: a job goes with its items and results in
one transaction; a job stored running is refused (unless --force: a kill left it so); a
server batch goes only once ended, with its output and error files, its input file kept."""

from __future__ import annotations

import io

from app.jobs import JobSpec, new_job
from app.jobs.inputs import csv_rows
from app.paths import files_dir
from app.server.batches.files import FileStore
from storage import DEFAULT_FILENAME, ItemResult, JobRecord, JobsRepository, open_database
from tests.support.cli import chorus_in_process


def repository(data_dir) -> JobsRepository:
    return JobsRepository(open_database(data_dir / DEFAULT_FILENAME))


def test_a_job_is_deleted_with_its_items_and_a_running_one_needs_force(tmp_path, capsys):
    jobs = repository(tmp_path)
    done = new_job(jobs, csv_rows("n\n1\n2\n"), JobSpec(template="Count to $n."), source="n.csv")
    for item in jobs.pending(done.id):
        jobs.finish(item.id, ItemResult(answer="ok", finish_reason="stop"))
    jobs.set_status(done.id, "completed")
    running = new_job(jobs, csv_rows("n\n1\n"), JobSpec(template="Count to $n."), source="r.csv")
    jobs.set_status(running.id, "running")
    jobs.db.close()

    said = chorus_in_process(capsys, tmp_path, "batch", "delete", done.id)
    assert said.returncode == 0 and said.stdout.strip() == f"deleted {done.id}"
    refused = chorus_in_process(capsys, tmp_path, "batch", "delete", running.id)
    assert refused.returncode == 2 and "is running: cancel it first" in refused.stderr
    assert chorus_in_process(capsys, tmp_path, "batch", "delete", "job_nope").returncode == 2

    jobs = repository(tmp_path)
    try:
        assert jobs.get(done.id) is None and jobs.items(done.id) == []
        assert jobs.get(running.id) is not None and len(jobs.items(running.id)) == 1
    finally:
        jobs.db.close()
    forced = chorus_in_process(capsys, tmp_path, "batch", "delete", running.id, "--force")
    assert forced.returncode == 0
    jobs = repository(tmp_path)
    try:
        assert jobs.all() == []
    finally:
        jobs.db.close()


def test_a_server_batch_goes_once_ended_with_its_output_files_and_not_its_input(tmp_path, capsys):
    store = FileStore(files_dir(tmp_path))
    upload = store.save(io.BytesIO(b'{"custom_id": "a"}\n'), "in.jsonl", "batch", 1 << 20)
    output = store.write("file-out1", "out.jsonl", "batch_output", [b"{}\n"])
    errors = store.write("file-err1", "err.jsonl", "batch_output", [b"{}\n"])
    spec = {"status": "in_progress", "input_file_id": upload.id, "output_file_id": None, "error_file_id": None}
    jobs = repository(tmp_path)
    jobs.create(JobRecord(id="batch_1", kind="openai", status="running", spec=spec, source="in.jsonl"), [])
    jobs.db.close()

    refused = chorus_in_process(capsys, tmp_path, "batch", "delete", "batch_1")
    assert refused.returncode == 2 and "batch batch_1 is in_progress" in refused.stderr

    jobs = repository(tmp_path)
    jobs.update("batch_1", status="completed",
                spec={**spec, "status": "completed", "output_file_id": output.id, "error_file_id": errors.id})
    jobs.db.close()
    said = chorus_in_process(capsys, tmp_path, "batch", "delete", "batch_1")
    assert said.returncode == 0 and said.stdout.strip() == "deleted batch_1 and its files file-out1, file-err1"
    assert store.get(output.id) is None and store.get(errors.id) is None
    assert not (files_dir(tmp_path) / "file-out1.data").exists()
    assert store.get(upload.id) is not None  # the user's upload stays


def test_the_ended_statuses_deletion_knows_are_the_servers():
    from app.jobs.deletion import BATCH_ENDED
    from app.server.batches.objects import TERMINAL

    assert set(TERMINAL) == set(BATCH_ENDED)
