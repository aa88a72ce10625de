"""Where one server keeps its stored Responses: the chat database (chorus.db) it was given,
opened at first use in a worker thread (opening migrates, which may take a moment and must
not hold the loop), closed when the server stops. A server given no database keeps none:
store is then a no-op and previous_response_id a 400.

Here, beside the assembly, and not in responses/: the server's state owns it (opened with
the server, closed when it stops), and every family sits above the state.

Not through app/conversations' ConversationSession, though a stored Response is a turn of a
conversation: what is stored is one row of plain values in a table of its own (responses,
revision 0006: its id, the whole input as chat messages, the output's text, usage), not a
conversation's message tree, and no reply row streams into it (it is written once, after the
reply ended, best effort). Its writes are a session's only once a Response is a branch (its
input the messages, previous_response_id the reply it goes on from): a new revision and a
migration of the rows kept, and GET rebuilding the input from the branch."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio

from app.server.http.errors import ApiError
from storage import Database, ResponseRecord, ResponsesRepository, StorageError, open_database

log = logging.getLogger(__name__)
T = TypeVar("T")


class ResponseStore:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._db: Database | None = None
        self._lock = threading.Lock()  # two first requests at once open it once

    @property
    def enabled(self) -> bool:
        return self.path is not None

    async def save(self, record: ResponseRecord) -> None:
        """Best effort: a reply already generated is answered even when it cannot be kept
        (a later previous_response_id then gets a 404 naming it)."""
        if not self.enabled:
            return
        try:
            await self._run(lambda repo: repo.save(record))
        except ApiError as exc:
            log.warning("response %s not stored: %s", record.id, exc.message)

    async def get(self, response_id: str) -> ResponseRecord | None:
        return await self._run(lambda repo: repo.get(response_id)) if self.enabled else None

    async def delete(self, response_id: str) -> bool:
        return await self._run(lambda repo: repo.delete(response_id)) if self.enabled else False

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    async def _run(self, work: Callable[[ResponsesRepository], T]) -> T:
        def run() -> T:
            return work(self._repository())

        try:
            return await anyio.to_thread.run_sync(run)
        except StorageError as exc:  # damaged, read-only, full: said in one line
            raise ApiError(503, f"the stored responses cannot be used: {exc}") from None

    def _repository(self) -> ResponsesRepository:
        with self._lock:
            if self._db is None:
                assert self.path is not None
                self._db = open_database(self.path)
            return ResponsesRepository(self._db)
