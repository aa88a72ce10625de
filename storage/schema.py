"""The SQLAlchemy models: what a chat history is made of.

Repositories turn these into plain dataclasses (storage/records.py); no ORM object
leaves this package.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Index, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class Preset(Base):
    """A named system prompt with default sampling: the shared KV prefix of many tabs."""

    __tablename__ = "presets"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    system_prompt: Mapped[str] = mapped_column(Text, default="")
    sampling_json: Mapped[str] = mapped_column(Text, default="{}")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ModelProfile(Base):
    """A local GGUF file or a remote OpenAI-compatible endpoint, with load settings.

    A GGUF profile is an entry of the model library (0005): its source says where the
    file came from, load_settings_json holds the per-model defaults applied at load."""

    __tablename__ = "model_profiles"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(16))  # "gguf" | "remote"
    path: Mapped[str | None] = mapped_column(Text, index=True)
    size_bytes: Mapped[int | None] = mapped_column(Integer)
    sha256: Mapped[str | None] = mapped_column(String(64))
    architecture: Mapped[str | None] = mapped_column(String(64))
    context_length: Mapped[int | None] = mapped_column(Integer)
    base_url: Mapped[str | None] = mapped_column(Text)
    remote_model: Mapped[str | None] = mapped_column(String(200))
    load_settings_json: Mapped[str] = mapped_column(Text, default="{}")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    source: Mapped[str | None] = mapped_column(String(16))  # "catalog" | "hub" | "local"; None: remote
    hub_repo: Mapped[str | None] = mapped_column(Text)  # "owner/name" of a Hub download
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Comparison(Base):
    """Conversations created together by one side-by-side run."""

    __tablename__ = "comparisons"

    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(String(500), default="")
    settings_json: Mapped[str] = mapped_column(Text, default="{}")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


CHAT_ORIGIN = "chat"  # a conversation of the window or the terminal
API_ORIGIN = "api"  # one of the server's stored Responses (storage/responses.py)


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(String(500), default="")
    # A stand-in title (the first message's words) that the model's title may replace;
    # a title the user set, or one generated, is not provisional and is never replaced.
    title_provisional: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    model_ref: Mapped[str | None] = mapped_column(Text)
    preset_id: Mapped[int | None] = mapped_column(ForeignKey("presets.id", ondelete="SET NULL"))
    comparison_id: Mapped[int | None] = mapped_column(
        ForeignKey("comparisons.id", ondelete="SET NULL")
    )
    sampling_json: Mapped[str] = mapped_column(Text, default="{}")
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    # The leaf of the branch on screen. No foreign key: messages point at conversations,
    # and a cycle of constraints makes SQLite migrations needlessly hard.
    active_message_id: Mapped[int | None] = mapped_column(Integer)
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Who wrote it (0013): "chat", the window's or the terminal's; "api", the server's stored
    # Responses, listed apart (the sidebar's "From the API") and kept out of search and export.
    origin: Mapped[str] = mapped_column(String(16), default=CHAT_ORIGIN, server_default=CHAT_ORIGIN)

    messages: Mapped[list[Message]] = relationship(
        back_populates="conversation", cascade="all, delete-orphan", passive_deletes=True
    )


class Message(Base):
    """One node of a conversation's tree: regenerate and edit add siblings."""

    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_conversation_parent", "conversation_id", "parent_id"),
                      Index("ix_messages_response_id", "response_id", unique=True))

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE")
    )
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="complete")
    error_text: Mapped[str | None] = mapped_column(Text)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    ttft_s: Mapped[float | None] = mapped_column(Float)
    tokens_per_s: Mapped[float | None] = mapped_column(Float)
    model: Mapped[str | None] = mapped_column(Text)
    # Process writing a streaming message; recovery leaves a live writer's message alone.
    owner_pid: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # A reply answered from retrieved excerpts: a JSON list of SourceRecord fields (0007).
    sources_json: Mapped[str | None] = mapped_column(Text)
    # Tool use (0008): an assistant turn's calls {"calls": [...]}, a tool message's {"result": {...}}.
    tool_json: Mapped[str | None] = mapped_column(Text)
    # A stored Response's reply (0013): its id ("resp_..."), by which a request continues it.
    response_id: Mapped[str | None] = mapped_column(String(64))
    # What an API said of the row beyond the columns (0013): a turn's content parts (images),
    # a stored Response's status, usage and how many of the turns above were its own input.
    api_json: Mapped[str | None] = mapped_column(Text)

    conversation: Mapped[Conversation] = relationship(back_populates="messages")


class Document(Base):
    """A file's extracted text, stored once under the sha256 of the file's bytes however many
    messages attach it (0007). Never changed once written: the same bytes, the same text.
    An image is one too (0011): its bytes in data, its text empty, no chunks."""

    __tablename__ = "documents"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(Text)  # the file's name when it was first stored
    mime: Mapped[str] = mapped_column(String(200))
    size_bytes: Mapped[int] = mapped_column(Integer)
    pages: Mapped[int | None] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    data: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)  # an image's bytes (0011)


class DocumentChunk(Base):
    """A retrieval unit of a document: text[start:end]. Its words are indexed in
    document_chunks_fts (storage/attachments.py writes the slice there), not stored twice here."""

    __tablename__ = "document_chunks"
    __table_args__ = (UniqueConstraint("sha256", "idx", name="uq_document_chunks_sha256_idx"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sha256: Mapped[str] = mapped_column(ForeignKey("documents.sha256", ondelete="CASCADE"))
    idx: Mapped[int] = mapped_column(Integer)
    start: Mapped[int] = mapped_column(Integer)
    end: Mapped[int] = mapped_column(Integer)
    page: Mapped[int | None] = mapped_column(Integer)
    heading: Mapped[str] = mapped_column(Text, default="")


class MessageAttachment(Base):
    """A document attached to a message. The document outlives it while another message
    (of any chat, a soft-deleted one too) attaches it; no cascade from documents, so a
    document in use cannot be deleted."""

    __tablename__ = "message_attachments"

    id: Mapped[int] = mapped_column(primary_key=True)
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"), index=True)
    sha256: Mapped[str] = mapped_column(ForeignKey("documents.sha256"), index=True)
    position: Mapped[int] = mapped_column(Integer)  # 0-based order on the message
    name: Mapped[str] = mapped_column(Text)  # the file's name as attached


class Setting(Base):
    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value_json: Mapped[str] = mapped_column(Text)


class Job(Base):
    """A background job (issue 37): one prompt template applied to every row of an input
    file, run on the engine's spare capacity. Its definition is JSON (template, system prompt,
    sampling, json_schema); its rows are its items."""

    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # "job_..." or "batch_..."
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    kind: Mapped[str] = mapped_column(String(16))  # "template" (chorus batch) | "openai" (/v1/batches)
    status: Mapped[str] = mapped_column(String(16))  # queued | running | paused | cancelled | completed
    spec_json: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text, default="")  # the input's name, for listing


class JobItem(Base):
    """One row of a job. Its result is written once, in its own transaction, as it finishes:
    (job_id, seq) is unique, and a result lands only on an item still without one."""

    __tablename__ = "job_items"
    __table_args__ = (UniqueConstraint("job_id", "seq"), Index("ix_job_items_job_state", "job_id", "state"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)  # the row's place in the input, from 0
    custom_id: Mapped[str | None] = mapped_column(Text)
    input_json: Mapped[str] = mapped_column(Text)  # the row's columns, or an OpenAI request line
    state: Mapped[str] = mapped_column(String(16), default="pending")  # pending | done | failed
    answer: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    seconds: Mapped[float] = mapped_column(Float, default=0.0)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # An item that could call tools: its turns, calls and results (OpenAI's message shape, JSON).
    exchange_json: Mapped[str | None] = mapped_column(Text)
