"""Background jobs and their items (the jobs and job_items tables, revision 0009).

What a job means (its template, its sampling, an OpenAI batch line) is app/jobs' business;
here a job is a row of plain values and its items are rows whose result is written exactly
once: `finish` changes only an item still pending, in a transaction of its own, so a result
that lands twice (a runner stopped and restarted) is kept once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from storage.database import Database
from storage.schema import Job, JobItem, utcnow

PENDING, DONE, FAILED = "pending", "done", "failed"


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: str
    kind: str
    status: str
    spec: dict
    source: str = ""
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ItemInput:
    """A row to run: its columns (or request line), or why it cannot run (a broken row)."""

    fields: dict
    custom_id: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ItemRecord:
    id: int
    job_id: str
    seq: int
    custom_id: str | None
    fields: dict
    state: str
    answer: str | None = None
    error: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    finished_at: datetime | None = None
    exchange: list[dict] | None = None  # an item with tools: the messages after its prompt


@dataclass(frozen=True, slots=True)
class ItemResult:
    answer: str | None
    finish_reason: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None
    # An item with tools: what its loop added after the prompt (assistant turns with their
    # tool_calls, {"role": "tool", ...} results, the final answer), OpenAI's message shape.
    exchange: list[dict] | None = None


class JobsRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, job: JobRecord, items: list[ItemInput]) -> JobRecord:
        """The job and all its items in one transaction: a job is never half created. A row
        that arrived broken is stored already failed, with its reason."""
        with self.db.begin() as s:
            row = Job(id=job.id, kind=job.kind, status=job.status, spec_json=json.dumps(job.spec), source=job.source)
            s.add(row)
            _add_items(s, job.id, items, 0)
            s.flush()
            return _job(row)

    def get(self, job_id: str) -> JobRecord | None:
        with self.db.begin() as s:
            row = s.get(Job, job_id)
            return _job(row) if row is not None else None

    def all(self) -> list[JobRecord]:
        with self.db.begin() as s:
            return [_job(r) for r in s.scalars(select(Job).order_by(Job.created_at, Job.id))]

    def set_status(self, job_id: str, status: str) -> None:
        with self.db.begin() as s:
            s.execute(update(Job).where(Job.id == job_id).values(status=status))

    def update(self, job_id: str, status: str | None = None, spec: dict | None = None,
               items: Sequence[ItemInput] = ()) -> None:
        """Changes a job's status and/or definition and adds items after its last, all in one
        transaction (an OpenAI batch gets its requests and leaves `validating` at once)."""
        values: dict = {}
        if status is not None:
            values["status"] = status
        if spec is not None:
            values["spec_json"] = json.dumps(spec)
        with self.db.begin() as s:
            if values:
                s.execute(update(Job).where(Job.id == job_id).values(**values))
            if items:
                last = s.scalar(select(func.max(JobItem.seq)).where(JobItem.job_id == job_id))
                _add_items(s, job_id, items, 0 if last is None else last + 1)

    def pending(self, job_id: str, limit: int | None = None) -> list[ItemRecord]:
        with self.db.begin() as s:
            query = select(JobItem).where(JobItem.job_id == job_id, JobItem.state == PENDING).order_by(JobItem.seq)
            return [_item(r) for r in s.scalars(query.limit(limit) if limit else query)]

    def items(self, job_id: str) -> list[ItemRecord]:
        with self.db.begin() as s:
            return [_item(r) for r in s.scalars(select(JobItem).where(JobItem.job_id == job_id).order_by(JobItem.seq))]

    def finish(self, item_id: int, result: ItemResult) -> bool:
        """Writes an item's result; False (and nothing written) when it already has one."""
        with self.db.begin() as s:
            done = s.execute(
                update(JobItem).where(JobItem.id == item_id, JobItem.state == PENDING).values(
                    state=FAILED if result.error else DONE, answer=result.answer, error=result.error,
                    finish_reason=result.finish_reason, prompt_tokens=result.prompt_tokens,
                    completion_tokens=result.completion_tokens, seconds=result.seconds, finished_at=utcnow(),
                    exchange_json=None if result.exchange is None else json.dumps(result.exchange)))
            return done.rowcount == 1

    def retry_failed(self, job_id: str) -> int:
        """Puts the job's failed items back to pending; how many."""
        with self.db.begin() as s:
            done = s.execute(
                update(JobItem).where(JobItem.job_id == job_id, JobItem.state == FAILED).values(
                    state=PENDING, answer=None, error=None, finish_reason=None, finished_at=None, exchange_json=None))
            return done.rowcount

    def counts(self, job_id: str) -> dict[str, int]:
        """Items per state: {"pending": n, "done": n, "failed": n}."""
        with self.db.begin() as s:
            query = select(JobItem.state, func.count()).where(JobItem.job_id == job_id).group_by(JobItem.state)
            rows = s.execute(query)
            return {PENDING: 0, DONE: 0, FAILED: 0} | {state: n for state, n in rows}

    def delete(self, job_id: str) -> JobRecord | None:
        """The job, its items and their results, in one transaction (the items explicitly,
        not left to the foreign key's cascade); the job as it was, or None when there is none."""
        with self.db.begin() as s:
            row = s.get(Job, job_id)
            if row is None:
                return None
            gone = _job(row)
            s.execute(delete(JobItem).where(JobItem.job_id == job_id))
            s.delete(row)
            return gone


def _add_items(s: Session, job_id: str, items: Sequence[ItemInput], first_seq: int) -> None:
    for seq, item in enumerate(items, first_seq):
        s.add(JobItem(job_id=job_id, seq=seq, custom_id=item.custom_id, input_json=json.dumps(item.fields),
                      state=FAILED if item.error else PENDING, error=item.error,
                      finished_at=utcnow() if item.error else None))


def _job(row: Job) -> JobRecord:
    return JobRecord(id=row.id, kind=row.kind, status=row.status, spec=json.loads(row.spec_json), source=row.source,
                     created_at=row.created_at)


def _item(row: JobItem) -> ItemRecord:
    return ItemRecord(id=row.id, job_id=row.job_id, seq=row.seq, custom_id=row.custom_id,
                      fields=json.loads(row.input_json), state=row.state, answer=row.answer, error=row.error,
                      finish_reason=row.finish_reason, prompt_tokens=row.prompt_tokens,
                      completion_tokens=row.completion_tokens, seconds=row.seconds, finished_at=row.finished_at,
                      exchange=None if row.exchange_json is None else json.loads(row.exchange_json))
