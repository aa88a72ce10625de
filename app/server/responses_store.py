"""Where one server keeps its stored Responses: the chat database (chorus.db) it was given,
opened at first use in a worker thread (opening migrates, which may take a moment and must
not hold the loop), closed when the server stops. A server given no database keeps none:
store is then a no-op and previous_response_id a 400.

A stored response is a branch of a conversation, written through the conversations room
(app/conversations/stored_responses.py) as the window's and the terminal's turns are: its
input the turns, its reply a message marked with its id, under the reply it continues.

Here, beside the assembly, and not in responses/: the server's state owns it (opened with
the server, closed when it stops), and every family sits above the state."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio

from app.conversations.stored_responses import save_response
from app.server.http.errors import ApiError
from storage import (
    Database,
    ResponseRecord,
    ResponsesRepository,
    StorageError,
    open_database,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


class ResponseStore:
    def __init__(self, path: Path | None, stored: Callable[[], None] | None = None) -> None:
        """stored: told after each save (ServerConfig.on_response_stored)."""
        self.path = path
        self._stored = stored
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
            await self._run(lambda repo: save_response(repo, record))
        except ApiError as exc:  # the response it continues deleted meanwhile (NotFoundError) too
            log.warning("response %s not stored: %s", record.id, exc.message)
            return
        if self._stored is not None:
            self._stored()

    async def get(self, response_id: str) -> ResponseRecord | None:
        return await self._run(lambda repo: repo.get(response_id)) if self.enabled else None

    async def conversation(self, response_id: str) -> list[dict] | None:
        """The turns of the branch the response ends, its reply last; None: no such response."""
        return await self._run(lambda repo: repo.conversation(response_id)) if self.enabled else None

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
