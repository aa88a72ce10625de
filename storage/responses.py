"""The server's stored Responses as conversations (revision 0013): a response is a branch of
one, kept so that a request continues it by id (previous_response_id), read back and deleted.

A response without a previous one opens a conversation of origin "api" (listed apart in
the window's sidebar, kept out of its search and of export); its input turns are messages, its reply a message marked
with the response's id. A response that continues another adds its turns and reply under
that reply: two requests continuing the same response are two branches of one tree, as a
regenerated answer is in a chat. Each save is one transaction.

What a turn means (its roles, its parts) is the server's business; here a turn is a plain
dict {role, content}, content a string or a list of parts kept as given, but for an image:
the caller stores it as a document (`images`, its bytes once, attached to the turn's
message, which the window shows and sends as any chat's image) and the part names it,
{"type": "image_url", "image_url": {"document": SHA256}}; read back, the part is a data:
URL again."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage import attachments
from storage.branches import branch_messages
from storage.database import Database
from storage.errors import NotFoundError, StorageError
from storage.records import NewDocument
from storage.schema import API_ORIGIN, Conversation, Document, Message, utcnow


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    id: str
    model: str
    input: list[dict]  # this request's own turns as chat messages [{role, content}]
    output_text: str
    status: str  # "completed" | "incomplete" (cut at its max_output_tokens)
    usage: dict
    previous_response_id: str | None = None
    created_at: datetime | None = None  # the response's own moment; None: when saved


class ResponsesRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def save(self, record: ResponseRecord, title: str = "", images: Sequence[NewDocument] = ()) -> ResponseRecord:
        """Its turns and reply, under the reply it continues or in a new conversation titled
        title; images: the documents its turns' image parts name. NotFoundError when the
        response it continues is gone (deleted meanwhile)."""
        by_sha = {doc.sha256: doc for doc in images}
        attachments.check_documents(images)
        with self.db.begin() as s:
            parent = None
            if record.previous_response_id is not None:
                parent = _reply_row(s, record.previous_response_id)
                if parent is None:
                    raise NotFoundError(f"no stored response {record.previous_response_id!r} to continue")
                conv = s.get_one(Conversation, parent.conversation_id)
            else:
                now = utcnow()
                conv = Conversation(title=title, origin=API_ORIGIN, model_ref=record.model, pinned=False,
                                    archived=False, created_at=now, updated_at=now, sampling_json="{}")
                s.add(conv)
                s.flush()
            moment = record.created_at or utcnow()
            parent_id = parent.id if parent is not None else None
            attachments.insert_documents(s, images)
            for turn in record.input:
                parent_id = _add(s, _turn_row(conv.id, parent_id, turn, moment))
                attachments.attach(s, parent_id, [(sha, by_sha[sha].name) for sha in _named_images(turn, by_sha)])
            reply = Message(conversation_id=conv.id, parent_id=parent_id, role="assistant",
                            content=record.output_text, status="complete", model=record.model,
                            prompt_tokens=record.usage.get("input_tokens"),
                            completion_tokens=record.usage.get("output_tokens"),
                            response_id=record.id, created_at=moment, updated_at=moment,
                            api_json=json.dumps({"status": record.status, "usage": record.usage,
                                                 "previous_response_id": record.previous_response_id,
                                                 "turns": len(record.input)}))
            conv.active_message_id = _add(s, reply)
            conv.updated_at = utcnow()
            return _record(s, reply, _own_turns(_path(s, reply)))

    def get(self, response_id: str) -> ResponseRecord | None:
        with self.db.begin() as s:
            reply = _reply_row(s, response_id)
            if reply is None:
                return None
            return _record(s, reply, _own_turns(_path(s, reply)))

    def conversation(self, response_id: str) -> list[dict] | None:
        """Every turn of the branch the response ends, its reply last: what a request that
        continues it puts before its own input. None when there is no such response."""
        with self.db.begin() as s:
            reply = _reply_row(s, response_id)
            return None if reply is None else [_turn(s, row) for row in _path(s, reply)]

    def delete(self, response_id: str) -> bool:
        """False when there was no such response. A response nothing continues goes with its
        own turns (and with the responses above it that were deleted while this one continued
        them; and with its conversation, once empty); one that others continue only loses its
        id: their turns stay readable, as OpenAI keeps them."""
        with self.db.begin() as s:
            reply = _reply_row(s, response_id)
            if reply is None:
                return False
            reply.response_id = None
            conv = s.get_one(Conversation, reply.conversation_id)
            row: Message | None = reply
            while row is not None and row.response_id is None and not _has_children(s, row.id):
                row = _delete_with_own_turns(s, row)
            if not _has_rows(s, conv.id):
                s.delete(conv)
            elif row is not None:
                conv.active_message_id = row.id
            return True


def _delete_with_own_turns(s: Session, reply: Message) -> Message | None:
    """Deletes a reply and the turns its request added; returns the message above them."""
    path = _path(s, reply)
    own = _own_turns(path)
    named = attachments.detach(s, [row.id for row in own])
    for row in reversed([*own, reply]):  # children first, one by one (the search index's triggers)
        s.delete(row)
        s.flush()
    attachments.drop_unreferenced(s, named)  # an image another message attaches stays
    above = path[len(path) - 2 - len(own)] if len(path) > len(own) + 1 else None
    # a reply of a response (its id cleared by an earlier delete), not a turn a client gave
    return above if above is not None and "turns" in _api(above) else None


def _own_turns(path: list[Message]) -> list[Message]:
    """The turns the request of the reply ending path added (its api_json counts them)."""
    own = int(_api(path[-1]).get("turns", 0))
    return path[len(path) - 1 - own:-1]


def _reply_row(s: Session, response_id: str) -> Message | None:
    """None too when the user deleted its conversation in the window (a soft delete: an
    undo brings the response back, the purge a day later ends it)."""
    query = select(Message).join(Conversation, Conversation.id == Message.conversation_id) \
        .where(Message.response_id == response_id, Conversation.deleted_at.is_(None))
    return s.scalars(query).first()


def _path(s: Session, leaf: Message) -> list[Message]:
    """The branch from the conversation's first message down to leaf, root first."""
    return list(s.scalars(branch_messages(leaf.id)))


def _has_children(s: Session, message_id: int) -> bool:
    return s.scalars(select(Message.id).where(Message.parent_id == message_id).limit(1)).first() is not None


def _has_rows(s: Session, conversation_id: int) -> bool:
    return s.scalars(select(Message.id).where(Message.conversation_id == conversation_id).limit(1)).first() \
        is not None


def _add(s: Session, row: Message) -> int:
    s.add(row)
    s.flush()
    return row.id


def _turn_row(conversation_id: int, parent_id: int | None, turn: dict, moment: datetime) -> Message:
    """A turn as a message: its text in content (what search and a chat's view read), its
    parts as given in api_json when it has more than text (an image)."""
    content = turn.get("content", "")
    api = None if isinstance(content, str) else json.dumps({"content": content})
    return Message(conversation_id=conversation_id, parent_id=parent_id, role=str(turn["role"]),
                   content=turn_text(content), status="complete", api_json=api, created_at=moment,
                   updated_at=moment)


def turn_text(content: object) -> str:
    """A turn's text: the string, or its text parts' joined."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")


def _named_images(turn: dict, by_sha: dict[str, NewDocument]) -> list[str]:
    """The sha256s of the documents a turn's image parts name, in order; StorageError for
    one not given."""
    content = turn.get("content")
    named = [_document_of(part) for part in content] if isinstance(content, list) else []
    for sha in named:
        if sha is not None and sha not in by_sha:
            raise StorageError(f"a turn names the image {sha}, which was not given; nothing was stored")
    return [sha for sha in named if sha is not None]


def _document_of(part: object) -> str | None:
    """The sha256 an image part names ({"image_url": {"document": SHA256}}), or None."""
    image = part.get("image_url") if isinstance(part, dict) and part.get("type") == "image_url" else None
    sha = image.get("document") if isinstance(image, dict) else None
    return sha if isinstance(sha, str) else None


def _turn(s: Session, row: Message) -> dict:
    content = _api(row).get("content", row.content)
    if isinstance(content, list) and any(_document_of(part) for part in content):
        content = [_data_url_part(s, part) for part in content]
    return {"role": row.role, "content": content}


def _data_url_part(s: Session, part: dict) -> dict:
    """An image part that names a document as the part given: a data: URL of its bytes."""
    sha = _document_of(part)
    doc = s.get(Document, sha) if sha is not None else None
    if doc is None or doc.data is None:
        return part
    return {**part, "image_url": {"url": f"data:{doc.mime};base64,{base64.b64encode(doc.data).decode('ascii')}"}}


def _api(row: Message) -> dict[str, Any]:
    return json.loads(row.api_json) if row.api_json else {}


def _record(s: Session, reply: Message, own: list[Message]) -> ResponseRecord:
    api = _api(reply)
    created = reply.created_at
    return ResponseRecord(id=str(reply.response_id), model=reply.model or "", input=[_turn(s, row) for row in own],
                          output_text=reply.content, status=str(api.get("status", "completed")),
                          usage=dict(api.get("usage", {})), previous_response_id=api.get("previous_response_id"),
                          created_at=created.replace(tzinfo=created.tzinfo or timezone.utc))
