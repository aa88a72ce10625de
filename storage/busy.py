"""Waiting out another writer: SQLite has one write lock per file, and a writer that finds
it taken waits the busy timeout (5 s), then fails with "database is locked". A write that
must not be lost (a reply's end) tries again with backoff, for a bounded time."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError

from storage.errors import DatabaseBusy

log = logging.getLogger(__name__)

T = TypeVar("T")

SQLITE_BUSY, SQLITE_LOCKED = 5, 6
RETRY_BUDGET_S = 30.0
FIRST_DELAY_S = 0.05
MAX_DELAY_S = 1.0


def is_locked(exc: BaseException) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED, raw or wrapped by SQLAlchemy. A deferred transaction that
    read before writing fails with it at once (no busy wait) when another writer committed
    in between: trying again is the cure there too."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.OperationalError) or code is None:
        return False
    return code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)


def retry_locked(work: Callable[[], T], what: str, budget_s: float | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """work(), again after a growing pause while the database is locked, for at most
    budget_s in all (each try may itself wait the busy timeout); then DatabaseBusy. Any other
    error is raised at once. work must be one transaction: a locked one changed nothing.
    budget_s: RETRY_BUDGET_S, read at the call."""
    budget_s = RETRY_BUDGET_S if budget_s is None else budget_s
    deadline = time.monotonic() + budget_s
    delay = FIRST_DELAY_S
    tries = 0
    while True:
        tries += 1
        try:
            return work()
        except DBAPIError as exc:
            if not is_locked(exc):
                raise
            if time.monotonic() + delay > deadline:
                raise DatabaseBusy(
                    f"could not {what}: the chat database stayed locked by another process for "
                    f"{budget_s:.0f} s ({tries} tries)"
                ) from None
            log.info("database locked; %s again in %.2f s", what, delay)
        sleep(delay)
        delay = min(delay * 2, MAX_DELAY_S)
