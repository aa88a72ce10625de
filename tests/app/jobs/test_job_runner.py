"""A small real job on the real model (app/jobs/runner.py): every item answered once at
spare priority, and a runner stopped mid-way is finished by a new one, each item exactly once."""

from __future__ import annotations

import threading

import pytest

from app.jobs import CANCELLED, COMPLETED, PAUSED, JobRunner, JobSpec, new_job
from storage import ItemInput, JobsRepository, open_database

pytestmark = pytest.mark.model


@pytest.fixture
def jobs(tmp_path):
    db = open_database(tmp_path / "chorus.db")
    yield JobsRepository(db)
    db.close()


def rows(n: int) -> list[ItemInput]:
    return [ItemInput(fields={"n": str(i)}) for i in range(n)]


SPEC = JobSpec(template="Say the number $n.", sampling={"max_tokens": 6, "temperature": 0.0})


def test_a_small_job_answers_every_item_once(jobs, shared_engine):
    job = new_job(jobs, [*rows(7), ItemInput(fields={"m": "x"})], SPEC)
    assert JobRunner(jobs, shared_engine, job.id, window=3).run() == COMPLETED
    items = jobs.items(job.id)
    assert [i.state for i in items] == ["done"] * 7 + ["failed"]
    assert all(i.answer and i.completion_tokens > 0 and i.finish_reason in ("stop", "length") for i in items[:7])
    assert "lacks: n" in items[7].error
    assert jobs.get(job.id).status == COMPLETED


def test_results_are_written_on_the_runners_thread_not_the_one_delivering_deltas(jobs, shared_engine):
    """Deltas come on the engine's thread: a SQLite commit there held up its next step (and
    a focused chat's tokens) each time an item ended; 8 items ending in one step held it 8
    commits long. Each write's thread recorded; each item's time still counts to its end."""
    job = new_job(jobs, rows(6), SPEC)
    threads: list[str] = []
    original = jobs.finish

    def recording_finish(item_id, result):
        threads.append(threading.current_thread().name)
        return original(item_id, result)

    jobs.finish = recording_finish  # type: ignore[method-assign]
    runner_thread = threading.current_thread().name
    assert JobRunner(jobs, shared_engine, job.id, window=3).run() == COMPLETED
    assert threads == [runner_thread] * 6
    items = jobs.items(job.id)
    assert [i.state for i in items] == ["done"] * 6 and all(0 < i.seconds < 60 for i in items)


@pytest.mark.parametrize("stop", [PAUSED, CANCELLED])
def test_a_stopped_job_is_finished_by_a_new_runner_exactly_once(jobs, shared_engine, stop):
    job = new_job(jobs, rows(8), SPEC)
    first = JobRunner(jobs, shared_engine, job.id, window=2)

    def stop_after_two(counts: dict) -> None:
        if counts["done"] >= 2:
            first.pause() if stop == PAUSED else first.cancel()

    assert first.run(on_progress=stop_after_two) == stop
    done_before = {i.seq: i.answer for i in jobs.items(job.id) if i.state == "done"}
    assert 2 <= len(done_before) < 8
    assert jobs.counts(job.id)["failed"] == 0  # a stopped item goes back to pending, not failed

    finished: list[int] = []
    original = jobs.finish
    lock = threading.Lock()

    def counting_finish(item_id, result):
        wrote = original(item_id, result)
        with lock:
            finished.append(item_id) if wrote else None
        return wrote

    jobs.finish = counting_finish  # type: ignore[method-assign]
    assert JobRunner(jobs, shared_engine, job.id, window=2).run() == COMPLETED
    items = jobs.items(job.id)
    assert [i.state for i in items] == ["done"] * 8
    assert {i.seq: i.answer for i in items if i.seq in done_before} == done_before  # not redone
    assert len(finished) == 8 - len(done_before) == len(set(finished))


def test_a_job_with_a_json_schema_answers_json_that_follows_it(jobs, shared_engine):
    """The schema's grammar is applied to every item: the real model's answers parse and
    validate (max_tokens leaves room for the whole object)."""
    import json

    person = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "age"], "additionalProperties": False}
    spec = JobSpec(template="Describe person number $n as JSON.", json_schema=person,
                   sampling={"max_tokens": 48, "temperature": 0.0})
    job = new_job(jobs, rows(3), spec)
    assert JobRunner(jobs, shared_engine, job.id, window=3).run() == COMPLETED
    items = jobs.items(job.id)
    assert [i.state for i in items] == ["done"] * 3, [i.error for i in items]
    assert all(set(json.loads(i.answer)) == {"name", "age"} for i in items)
