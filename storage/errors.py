class StorageError(RuntimeError):
    """Base of storage errors; the message says what went wrong and what was kept."""


class NotFoundError(StorageError, LookupError):
    pass


class ImportRejected(StorageError, ValueError):
    """An import file was refused as a whole; nothing was written."""


def require_import(ok: bool, message: str) -> None:
    """ImportRejected saying message unless ok: an import file's checks, one line each."""
    if not ok:
        raise ImportRejected(f"import rejected, nothing was written: {message}")


class DamagedDatabase(StorageError):
    """The chat database file is not a readable SQLite database (corrupted, truncated, not
    a database at all). Raised wherever it is found, on opening or later; the file is left
    exactly as it is, so a person can keep it, restore a backup or move it away."""

    def __init__(self, path, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(
            f"the chat database is damaged: {path} ({detail}); it was left as it is. To restore "
            f"a backup, quit Chorus, then put the copy (made by `chorus backup PATH`, or a "
            f"{path.name}.bak-* file made before an update) in place of {path.name} and delete "
            f"{path.name}-wal and {path.name}-shm; or move {path.name} away to start with no chats."
        )


class DatabaseReadOnly(StorageError):
    """The chat database cannot be written (its file is read-only, or on a read-only mount);
    reading it still works."""

    def __init__(self, path) -> None:
        self.path = path
        super().__init__(f"the chat database is read-only: {path} cannot be written (check the file's "
                         "permissions and its disk); nothing was changed")


class DiskFull(StorageError):
    """A write to the chat database found no room on its disk; the transaction was rolled
    back, so the same write can be tried again once there is room."""

    def __init__(self, path) -> None:
        self.path = path
        super().__init__(f"the disk is full: {path} could not be written; free some space")


class DatabaseBusy(StorageError):
    """Another process held the chat database's write lock for longer than we waited."""


class DatabaseUnavailable(StorageError):
    """The chat database cannot be opened or created where it is: its folder cannot be
    written (its mode, a read-only mount) or is missing. Nothing was changed."""

    def __init__(self, path, detail: str) -> None:
        self.path = path
        super().__init__(f"the chat database cannot be opened: {path} ({detail}); make its folder "
                         "writable, or choose another data folder with --data-dir")


class DiskError(StorageError):
    """The disk failed a read or write of the chat database (SQLite's disk I/O error) with
    room to spare on it; with little room the same error is DiskFull."""

    def __init__(self, path) -> None:
        self.path = path
        super().__init__(f"the disk failed a read or write of the chat database: {path}; check the disk "
                         "and its free space, then try again")
