"""A JobsRepository whose every call runs on one executor (the desktop's storage thread),
for a JobRunner on a thread of its own: the window's writes and the job's never contend for
SQLite. Reads wait for their answer (on the runner's thread, never the GUI's); an item's
result is queued and not waited for (the runner goes on to its next item while the storage
thread writes it). The executor runs calls in order: the job's final status is written after
every result queued before it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from storage import Database, ItemRecord, ItemResult, JobRecord, JobsRepository

log = logging.getLogger(__name__)

T = TypeVar("T")


class SerialJobs(JobsRepository):
    def __init__(self, db: Database, submit: Callable[..., Future]) -> None:
        super().__init__(db)
        self._submit = submit

    def _wait(self, call: Callable[..., T], *args: Any) -> T:
        return self._submit(call, self, *args).result()

    def get(self, job_id: str) -> JobRecord | None:
        return self._wait(JobsRepository.get, job_id)

    def set_status(self, job_id: str, status: str) -> None:
        self._wait(JobsRepository.set_status, job_id, status)

    def pending(self, job_id: str, limit: int | None = None) -> list[ItemRecord]:
        return self._wait(JobsRepository.pending, job_id, limit)

    def counts(self, job_id: str) -> dict[str, int]:
        return self._wait(JobsRepository.counts, job_id)

    def finish(self, item_id: int, result: ItemResult) -> bool:
        """Queued, not waited for: True once asked (the runner does not read the answer)."""
        try:
            self._submit(JobsRepository.finish, self, item_id, result)
        except RuntimeError as exc:  # the storage thread is shut down: the item stays pending
            log.warning("job item %d not written: %s", item_id, exc)
            return False
        return True
