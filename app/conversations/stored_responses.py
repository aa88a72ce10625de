"""The server's stored Responses are conversations: a response opens one (origin "api", out
of the window's lists) or adds a branch under the reply it continues, as a chat's turns do
(storage/responses.py writes the rows). What is decided here is what a chat decides for its
first message too: the conversation's title. The server calls these on a worker thread."""

from __future__ import annotations

import dataclasses

from app.chats.titles import stand_in_title
from app.conversations.image_files import MEDIA_TYPES, ImageError, image_document
from inference import RequestError, image_bytes
from storage import NewDocument, ResponseRecord, ResponsesRepository, turn_text

UNTITLED = "API response"  # a response whose input has no user text (only images, say)
SUFFIXES = {media: suffix for suffix, media in reversed(MEDIA_TYPES.items())}  # image/jpeg: .jpg


def save_response(repo: ResponsesRepository, record: ResponseRecord) -> ResponseRecord:
    """Its turns and reply (one transaction), a new conversation titled by its first user
    text unless it continues another response; its images stored as a chat's are (shown in
    the window, sent again when the user goes on there). NotFoundError: that one is gone."""
    stored, images = with_stored_images(record)
    return repo.save(stored, title=response_title(record), images=images)


def with_stored_images(record: ResponseRecord) -> tuple[ResponseRecord, list[NewDocument]]:
    """The record with each image sent as a data: URL naming its document instead of holding
    its bytes (storage keeps them once, as a chat's attached image's), and those documents.
    An image that does not decode stays as sent (the engine refused it before any reply)."""
    images: list[NewDocument] = []
    turns = []
    for turn in record.input:
        content = turn.get("content")
        if isinstance(content, list):
            turn = {**turn, "content": [_stored_part(part, images) for part in content]}
        turns.append(turn)
    return dataclasses.replace(record, input=turns), images


def _stored_part(part: object, images: list[NewDocument]) -> object:
    if not (isinstance(part, dict) and part.get("type") == "image_url" and isinstance(part.get("image_url"), dict)):
        return part
    media = str(part["image_url"].get("url", "")).partition(";")[0].removeprefix("data:").lower()
    try:  # the engine's own reading of the part's data: URL
        doc = image_document(f"image {len(images) + 1}{SUFFIXES.get(media, '.png')}", image_bytes(part))
    except (RequestError, ImageError):
        return part
    images.append(doc)
    return {**part, "image_url": {"document": doc.sha256}}


def response_title(record: ResponseRecord) -> str:
    for turn in record.input:
        if turn.get("role") == "user":
            title = stand_in_title(turn_text(turn.get("content", "")))
            if title:
                return title
    return UNTITLED

