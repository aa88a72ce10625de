"""The Jobs window's Qt-free pieces (app/jobs/form.py, progress.py, serial.py): the New job
form's preview, the rate and time left of a running job, the state a job is shown in, and
the repository that runs every call on one executor (the desktop's storage thread)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from app.jobs import JobForm, JobRate, JobSpec, SerialJobs, duration_text, job_view, model_name, new_job, preview
from app.jobs.inputs import csv_rows
from storage import ItemInput, ItemResult, JobRecord, JobsRepository, open_database

ROWS = csv_rows("name,city\nAda,London\nAlan,Wilmslow\nGrace,Arlington\nEdsger,Nuenen\n")


def test_the_preview_renders_the_first_three_rows():
    shown = preview(JobForm("Greet $name from ${city}.", max_tokens=32), ROWS)
    assert shown.ok and shown.rows == 4 and shown.columns == ("name", "city")
    assert [line.prompt for line in shown.lines] == [
        "Greet Ada from London.", "Greet Alan from Wilmslow.", "Greet Grace from Arlington."]
    assert "4 rows; columns: name, city" in shown.text() and "— row 3 —\nGreet Grace" in shown.text()


def test_a_template_naming_a_missing_column_is_shown_and_cannot_start():
    shown = preview(JobForm("Greet $name from $country."), ROWS)
    assert not shown.ok
    assert all("lacks: country" in (line.error or "") for line in shown.lines)
    assert "Error: the template names a column this row lacks: country" in shown.text()
    assert not preview(JobForm("Greet $"), ROWS).ok  # malformed


def test_an_empty_template_or_input_cannot_start():
    assert preview(JobForm("  "), ROWS).problem.startswith("Write a prompt template")
    assert preview(JobForm("Hi $name"), []).problem == "The input has no rows."
    broken = preview(JobForm("Hi $name"), csv_rows("name\nAda\nx,y\n"))
    assert not broken.ok and "2 fields where the header has 1" in broken.lines[1].error


def test_the_form_makes_the_spec_the_cli_makes():
    spec = JobForm("Hi $name", max_tokens=64, system_prompt="Be brief.").spec()
    assert spec.template == "Hi $name" and spec.system_prompt == "Be brief."
    assert spec.sampling == {"max_tokens": 64}


def test_the_rate_is_items_a_minute_over_the_last_finishes_and_gives_the_time_left():
    rate = JobRate(window_s=60)
    assert rate.per_minute() is None and rate.eta_s(10) is None
    rate.add(0.0, 5)  # five finished by an earlier run: not this run's rate
    rate.add(10.0, 5)
    assert rate.per_minute() is None  # nothing finished yet
    rate.add(30.0, 15)
    assert rate.per_minute() == pytest.approx(20.0)  # 10 items in 30 s
    assert rate.eta_s(20) == pytest.approx(60.0)
    assert rate.eta_s(0) == 0.0
    for t in range(40, 200, 10):  # a slower minute: the old samples leave the window
        rate.add(float(t), 15 + (t - 30) // 30)
    assert rate.per_minute() == pytest.approx(2.0, abs=0.3)


def test_durations_read_as_seconds_minutes_hours():
    assert [duration_text(s) for s in (None, 4.4, 61, 3725)] == ["", "4 s", "1 min 01 s", "1 h 02 min"]


def test_a_template_job_left_running_is_shown_interrupted_and_resumable():
    job = JobRecord(id="job_1", kind="template", status="running", spec={}, source="people.csv")
    counts = {"pending": 3, "done": 1, "failed": 1}
    shown = job_view(job, counts, running_here=False)
    assert shown.state == "interrupted" and shown.resumable and not shown.running
    assert shown.progress_text() == "2/5 · 1 failed" and shown.total == 5
    rate = JobRate()
    rate.add(0.0, 0)
    rate.add(30.0, 2)
    live = job_view(job, counts, running_here=True, rate=rate)
    assert live.running and not live.resumable and live.rate_text() == "4.0 items/min"
    assert live.eta_s == pytest.approx(45.0)
    batch = JobRecord(id="batch_1", kind="openai", status="in_progress", spec={})
    assert not job_view(batch, counts, running_here=False).resumable  # the server runs its batches
    expired = job_view(JobRecord(id="batch_2", kind="openai", status="cancelled", spec={"status": "expired"}),
                       counts, running_here=False)
    assert expired.state == "expired" and expired.deletable  # OpenAI's status, not the runner's
    going = job_view(JobRecord(id="batch_3", kind="openai", status="running", spec={"status": "in_progress"}),
                     counts, running_here=False)
    assert going.state == "in_progress" and not going.deletable
    done = job_view(JobRecord(id="job_2", kind="template", status="completed", spec={}), {"done": 2}, False)
    assert not done.resumable and done.progress_text() == "2/2"


def test_serial_jobs_run_every_call_on_the_executor_and_queue_results(tmp_path):
    db = open_database(tmp_path / "chorus.db")
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage")
    try:
        plain = JobsRepository(db)
        job = new_job(plain, [ItemInput(fields={"n": "1"}), ItemInput(fields={"n": "2"})],
                      JobForm("Say $n").spec())
        threads: list[str] = []
        original = JobsRepository.counts

        def counting(self, job_id):
            import threading
            threads.append(threading.current_thread().name)
            return original(self, job_id)

        JobsRepository.counts = counting
        try:
            serial = SerialJobs(db, pool.submit)
            first = serial.pending(job.id)[0]
            assert serial.finish(first.id, ItemResult(answer="one", finish_reason="stop"))
            serial.set_status(job.id, "completed")  # after the result queued before it
            assert serial.counts(job.id) == {"pending": 1, "done": 1, "failed": 0}
            assert threads and all(name.startswith("storage") for name in threads)
        finally:
            JobsRepository.counts = original
        assert plain.get(job.id).status == "completed"
        pool.shutdown(wait=True)
        assert not serial.finish(first.id, ItemResult(answer="again", finish_reason="stop"))  # no thread: not written
    finally:
        pool.shutdown(wait=True)
        db.close()


def test_retry_failed_puts_failed_items_back_to_pending(tmp_path):
    db = open_database(tmp_path / "chorus.db")
    try:
        jobs = JobsRepository(db)
        job = new_job(jobs, [ItemInput(fields={"n": "1"}), ItemInput(fields={"n": "2"})], JobForm("$n").spec())
        first, second = jobs.pending(job.id)
        jobs.finish(first.id, ItemResult(answer="1", finish_reason="stop"))
        jobs.finish(second.id, ItemResult(answer=None, finish_reason="error", error="boom"))
        assert jobs.retry_failed(job.id) == 1
        assert [i.state for i in jobs.items(job.id)] == ["done", "pending"]
        assert jobs.items(job.id)[1].error is None
    finally:
        db.close()


def test_a_job_runs_on_its_own_model_by_file_name():
    spec = JobSpec(template="$q", model="/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert spec.runs_on("/elsewhere/SmolLM2-135M-Instruct.Q4_1.gguf") and not spec.runs_on("/models/gemma.gguf")
    assert JobSpec(template="$q").runs_on("/models/gemma.gguf"), "a job made before models were kept runs on any"
    assert JobSpec.from_json({"template": "$q"}).model == ""  # a stored spec without the field
    assert model_name("/models/gemma.gguf") == "gemma.gguf" and model_name("Qwen/Qwen2.5-7B") == "Qwen/Qwen2.5-7B"
