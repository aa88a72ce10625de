"""Background jobs' storage (storage/jobs.py) on a real SQLite file: a job and its items are
created together, each result lands exactly once, failed items retry, and a second runner
(a fresh connection, as after a kill) sees only what is still pending."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from storage import ItemInput, ItemResult, JobRecord, JobsRepository, open_database
from storage.schema import JobItem
from tests.support.databases import seed_database


@pytest.fixture
def jobs(tmp_path):
    db = open_database(seed_database(tmp_path / "chorus.db"))
    yield JobsRepository(db)
    db.close()


def make_job(jobs: JobsRepository, n: int = 3, broken: int | None = None) -> str:
    items = [ItemInput(fields={"name": f"row {i}"}, custom_id=f"c{i}",
                       error="line 3: not JSON" if i == broken else None) for i in range(n)]
    jobs.create(JobRecord(id="job_1", kind="template", status="queued", spec={"template": "Hi $name"},
                          source="in.csv"), items)
    return "job_1"


def test_a_job_reads_back_with_its_items_in_order(jobs):
    make_job(jobs, n=3)
    job = jobs.get("job_1")
    assert job is not None and (job.spec, job.source, job.status) == ({"template": "Hi $name"}, "in.csv", "queued")
    assert [(i.seq, i.custom_id, i.fields, i.state) for i in jobs.items("job_1")] == [
        (0, "c0", {"name": "row 0"}, "pending"), (1, "c1", {"name": "row 1"}, "pending"),
        (2, "c2", {"name": "row 2"}, "pending")]
    assert [j.id for j in jobs.all()] == ["job_1"]


def test_a_broken_row_is_stored_failed_with_its_reason_and_the_rest_run(jobs):
    make_job(jobs, n=3, broken=1)
    assert jobs.counts("job_1") == {"pending": 2, "done": 0, "failed": 1}
    assert [i.seq for i in jobs.pending("job_1")] == [0, 2]
    assert jobs.items("job_1")[1].error == "line 3: not JSON"


def test_a_result_lands_exactly_once(jobs):
    make_job(jobs, n=2)
    first = jobs.pending("job_1")[0]
    assert jobs.finish(first.id, ItemResult(answer="Hello", finish_reason="stop", prompt_tokens=4,
                                            completion_tokens=1, seconds=0.5)) is True
    assert jobs.finish(first.id, ItemResult(answer="again", finish_reason="stop")) is False
    got = jobs.items("job_1")[0]
    assert (got.state, got.answer, got.prompt_tokens, got.completion_tokens, got.finished_at is not None) == (
        "done", "Hello", 4, 1, True)
    assert [i.seq for i in jobs.pending("job_1")] == [1]


def test_a_row_place_is_unique_in_its_job(jobs):
    make_job(jobs, n=1)
    with pytest.raises(IntegrityError), jobs.db.begin() as s:
        s.add(JobItem(job_id="job_1", seq=0, input_json="{}", state="pending", prompt_tokens=0,
                      completion_tokens=0, seconds=0.0))


def test_failed_items_retry_and_done_ones_stay(jobs):
    make_job(jobs, n=3)
    a, b, _ = jobs.pending("job_1")
    jobs.finish(a.id, ItemResult(answer="ok", finish_reason="stop"))
    jobs.finish(b.id, ItemResult(answer=None, finish_reason=None, error="engine stopped"))
    assert jobs.counts("job_1") == {"pending": 1, "done": 1, "failed": 1}
    assert jobs.retry_failed("job_1") == 1
    assert [i.seq for i in jobs.pending("job_1")] == [1, 2]
    assert jobs.items("job_1")[0].answer == "ok"


def test_a_new_connection_resumes_without_redoing_finished_items(tmp_path):
    """As after a kill: what was written before is there; only the rest is pending."""
    db = open_database(tmp_path / "chorus.db")
    jobs = JobsRepository(db)
    make_job(jobs, n=4)
    for item in jobs.pending("job_1", limit=2):
        jobs.finish(item.id, ItemResult(answer=f"a{item.seq}", finish_reason="stop"))
    db.close()
    again = JobsRepository(open_database(tmp_path / "chorus.db"))
    try:
        assert [i.seq for i in again.pending("job_1")] == [2, 3]
        assert [i.answer for i in again.items("job_1")] == ["a0", "a1", None, None]
    finally:
        again.db.close()


def test_deleting_a_job_deletes_its_items(jobs):
    make_job(jobs, n=2)
    jobs.set_status("job_1", "cancelled")
    assert jobs.get("job_1").status == "cancelled"
    other = jobs.create(JobRecord(id="job_2", kind="template", status="queued", spec={}),
                        [ItemInput(fields={"n": 1})])
    first = jobs.pending("job_1")[0]
    jobs.finish(first.id, ItemResult(answer="kept?", finish_reason="stop"))
    gone = jobs.delete("job_1")
    assert gone is not None and gone.id == "job_1" and gone.status == "cancelled"
    assert jobs.delete("job_1") is None and jobs.get("job_1") is None
    assert jobs.items("job_1") == []
    with jobs.db.begin() as s:  # no orphan row left, results included
        assert s.query(JobItem).filter(JobItem.job_id == "job_1").count() == 0
    assert [i.fields for i in jobs.items(other.id)] == [{"n": 1}]  # another job's items stay


def test_update_adds_items_after_the_last_and_changes_status_and_spec_together(jobs):
    jobs.create(JobRecord(id="batch_1", kind="openai", status="queued", spec={"status": "validating"}), [])
    assert jobs.items("batch_1") == []
    jobs.update("batch_1", status="running", spec={"status": "in_progress"},
                items=[ItemInput(fields={"n": 0}, custom_id="a"), ItemInput(fields={}, custom_id="b", error="bad")])
    jobs.update("batch_1", items=[ItemInput(fields={"n": 2}, custom_id="c")])
    job = jobs.get("batch_1")
    assert (job.status, job.spec) == ("running", {"status": "in_progress"})
    assert [(i.seq, i.custom_id, i.state) for i in jobs.items("batch_1")] == [
        (0, "a", "pending"), (1, "b", "failed"), (2, "c", "pending")]
