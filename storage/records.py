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
