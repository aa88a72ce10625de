class StorageError(RuntimeError):
    """Base of storage errors; the message says what went wrong and what was kept."""


class NotFoundError(StorageError, LookupError):
    pass


class ImportRejected(StorageError, ValueError):
    """An import file was refused as a whole; nothing was written."""
