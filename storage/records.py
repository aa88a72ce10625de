"""Plain dataclasses that leave the storage package (never ORM objects)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime


class MessageStatus(str, enum.Enum):
    COMPLETE = "complete"
    STREAMING = "streaming"
    INTERRUPTED = "interrupted"  # the reply ended without its end: a crash, a killed process
    STOPPED = "stopped"  # the user stopped it (its text is what was written)
    ERROR = "error"


ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class ConversationRecord:
    id: int
    title: str
    created_at: datetime
    updated_at: datetime
    model_ref: str | None
    preset_id: int | None
    comparison_id: int | None
    sampling: dict
    pinned: bool
    archived: bool
    active_message_id: int | None
    deleted: bool
    # The title is a stand-in the generated title may replace (see schema.Conversation).
    title_provisional: bool = False
    origin: str = "chat"  # or "api": a stored Response's (schema.CHAT_ORIGIN, API_ORIGIN)


@dataclass(frozen=True, slots=True)
class MessageRecord:
    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    status: MessageStatus
    error_text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    ttft_s: float | None
    tokens_per_s: float | None
    model: str | None
    created_at: datetime
    updated_at: datetime
    # A reply that answered from retrieved excerpts: the excerpts it was shown, in order.
    sources: tuple[SourceRecord, ...] = ()
    # An assistant turn that called tools: its calls; a "tool" message: the result of which call.
    tool_calls: tuple[ToolCallRecord, ...] = ()
    tool_result: ToolResultRecord | None = None


@dataclass(frozen=True, slots=True)
class BranchPosition:
    """Where a message sits among its siblings: index (1-based) of count."""

    index: int
    count: int
    sibling_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ActivePath:
    conversation: ConversationRecord
    messages: list[MessageRecord]
    # Only messages with siblings are listed; the others are 1 of 1.
    branches: dict[int, BranchPosition] = field(default_factory=dict)
    # The documents attached to the path's messages, by message id (messages without any
    # are not listed), in the order they were attached.
    attachments: dict[int, tuple[AttachmentRecord, ...]] = field(default_factory=dict)

    def position(self, message_id: int) -> BranchPosition:
        return self.branches.get(message_id) or BranchPosition(1, 1, (message_id,))


@dataclass(frozen=True, slots=True)
class SearchHit:
    conversation_id: int
    conversation_title: str
    message_id: int | None  # None: the title matched
    role: str | None
    # The snippet as (text, highlighted) runs, so each view marks matches its own way.
    snippet: tuple[tuple[str, bool], ...]
    rank: float
    # The words were found in this attached document (message_id: the message attaching it).
    document_name: str | None = None
    origin: str = "chat"  # the conversation's: "chat", or "api" (a stored Response's)

    @property
    def snippet_text(self) -> str:
        return "".join(text for text, _ in self.snippet)


@dataclass(frozen=True, slots=True)
class PresetRecord:
    id: int
    name: str
    system_prompt: str
    sampling: dict
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ModelProfileRecord:
    id: int
    name: str
    kind: str
    path: str | None
    size_bytes: int | None
    sha256: str | None
    architecture: str | None
    context_length: int | None
    base_url: str | None
    remote_model: str | None
    load_settings: dict
    created_at: datetime
    # The model library (GGUF profiles): "catalog" | "hub" | "local"; None for a remote one.
    source: str | None = None
    hub_repo: str | None = None
    last_used_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ComparisonRecord:
    id: int
    title: str
    settings: dict
    created_at: datetime
    conversation_ids: tuple[int, ...]
    updated_at: datetime | None = None


# ----- documents attached to messages ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """One retrieval unit of a document: text[start:end], on a page (1-based; None for a
    format without pages) under a heading ("" before the first one)."""

    start: int
    end: int
    page: int | None = None
    heading: str = ""


@dataclass(frozen=True, slots=True)
class NewDocument:
    """A document extracted from a file, to be stored once under the sha256 of the file's
    bytes (the same file attached by many chats is one row)."""

    sha256: str
    name: str
    mime: str
    size_bytes: int
    text: str
    pages: int | None
    chunks: tuple[ChunkSpan, ...]
    data: bytes | None = None  # an image: its bytes (text empty, no chunks); see is_image

    @property
    def is_image(self) -> bool:
        return self.data is not None


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    sha256: str
    name: str  # the file's name when it was first stored
    mime: str
    size_bytes: int
    text: str
    pages: int | None
    chunks: tuple[ChunkSpan, ...]
    created_at: datetime
    data: bytes | None = None  # an image: its bytes (text empty, no chunks)

    @property
    def is_image(self) -> bool:
        return self.data is not None


@dataclass(frozen=True, slots=True)
class AttachmentRecord:
    """A document attached to a message: its metadata, not its text (DocumentRepository)."""

    message_id: int
    position: int  # 0-based order on the message
    name: str  # the file's name as attached
    sha256: str
    mime: str
    size_bytes: int
    pages: int | None
    chars: int
    is_image: bool = False  # an image (its bytes kept: DocumentRepository.document), not text


@dataclass(frozen=True, slots=True)
class ChunkHit:
    """A chunk that matched a retrieval query (FTS5 bm25: lower rank is better)."""

    sha256: str
    index: int  # the chunk's position in its document's chunks
    chunk: ChunkSpan
    rank: float


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """An excerpt a reply was shown: [label] in the prompt, a citation in the view."""

    label: int
    sha256: str
    name: str
    chunk_index: int
    page: int | None
    cited: bool  # the reply names [label] in its text, or quotes the excerpt
    # Where in the document, in a reader's words: its headings' path ("Install › Linux"), a
    # workbook's sheet and rows ("Sales, rows 12–40"); "" for none (and rows stored before it).
    where: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """A tool call an assistant turn made: arguments as a JSON object's text (OpenAI's)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolResultRecord:
    """What a "tool" message answers (its content is the result's text): the call, the tool,
    whether it failed or the user denied it, how long it ran, characters cut off its output,
    whether the user stopped it (cancelled: never run, or given up while it ran)."""

    call_id: str
    name: str
    is_error: bool = False
    denied: bool = False
    duration_s: float | None = None
    cut_chars: int = 0
    cancelled: bool = False
