"""The server's stored Responses are conversations: a response opens one (origin "api", out
of the window's lists) or adds a branch under the reply it continues, as a chat's turns do
(storage/responses.py writes the rows). What is decided here is what a chat decides for its
first message too: the conversation's title. The server calls these on a worker thread."""

from __future__ import annotations

from app.chats.titles import stand_in_title
from storage import ResponseRecord, ResponsesRepository, turn_text

UNTITLED = "API response"  # a response whose input has no user text (only images, say)


def save_response(repo: ResponsesRepository, record: ResponseRecord) -> ResponseRecord:
    """Its turns and reply (one transaction), a new conversation titled by its first user
    text unless it continues another response. NotFoundError: that one is gone."""
    return repo.save(record, title=response_title(record))


def response_title(record: ResponseRecord) -> str:
    for turn in record.input:
        if turn.get("role") == "user":
            title = stand_in_title(turn_text(turn.get("content", "")))
            if title:
                return title
    return UNTITLED

