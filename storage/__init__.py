"""Chat storage: SQLite through SQLAlchemy 2.0, migrated with Alembic.

Imports no Qt and no engine. Everything that leaves this package is a plain dataclass.
"""

from storage.busy import retry_locked
from storage.catalog import CatalogRepository
from storage.database import DEFAULT_FILENAME, Database, open_database
from storage.documents import DocumentRepository
from storage.errors import (
    DamagedDatabase,
    DatabaseBusy,
    DatabaseReadOnly,
    DatabaseUnavailable,
    DiskError,
    DiskFull,
    ImportRejected,
    NotFoundError,
    StorageError,
)
from storage.jobs import ItemInput, ItemRecord, ItemResult, JobRecord, JobsRepository
from storage.library import LibraryRepository
from storage.records import (
    ActivePath,
    AttachmentRecord,
    BranchPosition,
    ChunkHit,
    ChunkSpan,
    ConversationRecord,
    DocumentRecord,
    MessageRecord,
    MessageStatus,
    NewDocument,
    SearchHit,
    SourceRecord,
    ToolCallRecord,
    ToolResultRecord,
)
from storage.repository import ChatRepository
from storage.responses import ResponseRecord, ResponsesRepository, turn_text
from storage.schema import API_ORIGIN, CHAT_ORIGIN
from storage.search import matching_messages, search
from storage.unused_chats import discard_unused

__all__ = [
    "ActivePath",
    "API_ORIGIN",
    "AttachmentRecord",
    "BranchPosition",
    "CatalogRepository",
    "CHAT_ORIGIN",
    "ChatRepository",
    "ChunkHit",
    "ChunkSpan",
    "ConversationRecord",
    "DamagedDatabase",
    "Database",
    "DatabaseBusy",
    "DatabaseReadOnly",
    "DatabaseUnavailable",
    "DEFAULT_FILENAME",
    "discard_unused",
    "DiskError",
    "DiskFull",
    "DocumentRecord",
    "DocumentRepository",
    "ImportRejected",
    "ItemInput",
    "ItemRecord",
    "ItemResult",
    "JobRecord",
    "JobsRepository",
    "LibraryRepository",
    "matching_messages",
    "MessageRecord",
    "MessageStatus",
    "NewDocument",
    "NotFoundError",
    "open_database",
    "ResponseRecord",
    "ResponsesRepository",
    "retry_locked",
    "search",
    "SearchHit",
    "SourceRecord",
    "StorageError",
    "ToolCallRecord",
    "ToolResultRecord",
    "turn_text",
]
