"""Opening the SQLite file: connection settings, migrations (after a backup), sessions."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import ResolutionError
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.orm import Session, sessionmaker

from storage.errors import DamagedDatabase, DatabaseReadOnly, DatabaseUnavailable, DiskError, DiskFull, StorageError
from storage.private_files import create_private, private_folder

log = logging.getLogger(__name__)

DEFAULT_FILENAME = "chorus.db"
MIGRATIONS = Path(__file__).parent / "migrations"
BUSY_TIMEOUT_MS = 5000
# SQLite's primary result codes for a file that is not (or no longer) a database, and for
# one that cannot be written.
SQLITE_CORRUPT, SQLITE_NOTADB = 11, 26
SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN = 8, 10, 13, 14
# A disk I/O error with less room than this left is a full disk: SQLite says "disk I/O
# error" when it cannot grow the -shm file (SQLITE_IOERR_SHMSIZE), not "disk is full".
LITTLE_ROOM = 1 << 20


def _configure_connection(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    # WAL: readers never block the writer. NORMAL sync in WAL mode survives a killed
    # process (committed pages are in the OS); only a power cut may lose the last commit.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cur.close()


class Database:
    """One SQLite file. Thread-safe: every unit of work gets its own session."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            private_folder(self.path.parent)
            create_private(self.path)  # SQLite gives its -wal and -shm files this file's mode
        except OSError as exc:
            raise DatabaseUnavailable(self.path, exc.strerror or str(exc)) from None
        self.engine: Engine = create_engine(f"sqlite:///{self.path}")
        event.listen(self.engine, "connect", _configure_connection)
        event.listen(self.engine, "handle_error", self._translate)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.backup_path: Path | None = None

    def session(self) -> Session:
        return self._sessions()

    def begin(self):
        """`with db.begin() as s:` one transaction, committed on success."""
        return self._sessions.begin()

    @contextmanager
    def immediate(self) -> Iterator[Connection]:
        """`with db.immediate() as conn:` one write transaction that takes SQLite's write
        lock at its start (BEGIN IMMEDIATE), committed on success. Reading first in a
        deferred transaction and writing later fails at once, without waiting out the busy
        timeout, when another writer committed in between; a bulk writer that reads the
        next free ids must hold the lock before it reads them."""
        with self.engine.connect() as conn:
            # pysqlite (legacy transaction mode) sends no BEGIN of its own once one is open.
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    def require_writable(self) -> None:
        """DatabaseReadOnly now rather than at the first write, for a command that saves as
        it goes (a chat): said before it costs a model load or a typed message."""
        with self.immediate() as conn:
            # The lock alone succeeds on a read-only file: a page must be written. Page 1's
            # user_version set to what it is, rolled back: nothing changes.
            version = conn.exec_driver_sql("PRAGMA user_version").scalar_one()
            conn.exec_driver_sql(f"PRAGMA user_version = {int(version)}")
            conn.rollback()

    def close(self) -> None:
        self.engine.dispose()

    def _translate(self, context: ExceptionContext) -> None:
        """Every query, on opening or later: a corrupted or foreign file raises
        DamagedDatabase, a file that cannot be written DatabaseReadOnly, no room on its
        disk DiskFull, a file or folder that cannot be opened DatabaseUnavailable, a disk
        that fails DiskError (one clear message each) instead of SQLAlchemy's DatabaseError
        and its SQL."""
        original = context.original_exception
        code = _primary_code(original)
        if is_damage(original):
            raise DamagedDatabase(self.path, str(original)) from original
        if code == SQLITE_READONLY:
            raise DatabaseReadOnly(self.path) from original
        if code == SQLITE_FULL or (code == SQLITE_IOERR and self._little_room()):
            raise DiskFull(self.path) from original
        if code == SQLITE_IOERR:
            raise DiskError(self.path) from original
        if code == SQLITE_CANTOPEN:  # in WAL mode even a reader needs to make the -shm file
            writable = os.access(self.path.parent, os.W_OK)
            raise DatabaseUnavailable(self.path, str(original) if writable else "its folder cannot be written") \
                from original

    def _little_room(self) -> bool:
        try:
            return shutil.disk_usage(self.path.parent).free < LITTLE_ROOM
        except OSError:
            return False

    # ----- migrations --------------------------------------------------------------

    def current_revision(self) -> str | None:
        with self.engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()

    def upgrade(self, revision: str = "head") -> None:
        with self.engine.connect() as conn:
            # Batch migrations rebuild tables; constraints are checked again afterwards.
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()
            try:
                with conn.begin():
                    command.upgrade(_alembic_config(conn), revision)
                problems = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                conn.commit()
                if problems:
                    raise RuntimeError(f"foreign key violations after migration: {problems[:3]}")
            finally:
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                conn.commit()

    def backup(self, label: str) -> Path:
        """A consistent copy of the file (SQLite's online backup), next to it."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%f")
        target = self.path.with_name(f"{self.path.name}.bak-{label}-{stamp}")
        create_private(target)  # a copy of every chat: as private as the database
        with sqlite3.connect(self.path) as src, sqlite3.connect(target) as dst:
            src.backup(dst)
        return target


def is_damage(exc: BaseException) -> bool:
    """Corruption or a foreign file, not a lock, a full disk or a bad query."""
    return _primary_code(exc) in (SQLITE_CORRUPT, SQLITE_NOTADB)


def _primary_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.DatabaseError) or code is None:
        return None
    return int(code) & 0xFF  # extended codes keep the primary in the low byte


def head_revision() -> str:
    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    if head is None:  # an install that lost storage/migrations/versions (package data)
        raise StorageError(f"no database migrations in {MIGRATIONS}: the installation is incomplete")
    return head


def _known(revision: str) -> bool:
    try:
        return ScriptDirectory(str(MIGRATIONS)).get_revision(revision) is not None
    except (ResolutionError, CommandError):  # alembic wraps one in the other
        return False


def _alembic_config(connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def open_database(path: Path) -> Database:
    """Open (or create) the chat database and bring its schema to head.

    An existing database that needs migrating is first copied to
    `<name>.bak-<revision>-<time>`; a new one is created at head.
    """
    path = Path(path)
    existed = path.exists() and path.stat().st_size > 0
    db = Database(path)
    try:
        _bring_to_head(db, existed)
    except BaseException:  # its connections closed: nothing keeps the file (or its disk) open
        db.close()
        raise
    return db


def _bring_to_head(db: Database, existed: bool) -> None:
    path = db.path
    current = db.current_revision() if existed else None
    if current is not None and not _known(current):
        raise StorageError(
            f"{path.name} was written by a newer Chorus (schema revision {current}); this "
            f"version knows up to {head_revision()}. Update Chorus; the file was not changed."
        )
    if current != head_revision():
        if existed:
            db.backup_path = db.backup(current or "unversioned")
            log.info("backed up %s to %s before migrating from %s", path, db.backup_path, current)
        db.upgrade()
