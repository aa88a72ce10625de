"""An Anthropic Messages body (already JSON) to what the engine runs, validated field by
field with the readers of calls/parsing.py.

As Anthropic: max_tokens is required; system is a string or text blocks; messages alternate
user and assistant turns of a string or text blocks, and a last assistant turn is a prefill
the reply continues; temperature is 0..1 (default 1), top_k and top_p as theirs (the
sampling fields are the engine's table's: calls/parsing.py, api_sampling). A user turn may
hold image blocks with a base64 source (calls/images.py makes them the engine's part; a url
or file source is refused: this server fetches nothing). Blocks of any other type
(tool_use, tool_result, documents) and `tools` are refused with a 400 naming them, rather
than dropped: a reply that silently ignored them would look like an answer to them.
Unknown fields are ignored; metadata is checked to be an object and not used."""

from __future__ import annotations

from typing import Any

from app.server.calls.images import NO_FETCH, base64_part, within_limit
from app.server.calls.parsing import (
    Generation,
    api_sampling,
    bad,
    checked,
    content_text,
    flag,
    integer,
    shown,
    stop_strings,
    valid_text,
)
from inference import ANTHROPIC, ChatRequest, SamplingParams

MAX_STOP_SEQUENCES = 16
ROLES = ("user", "assistant")


def message_generation(body: dict, cap: int | None) -> Generation:
    """A /v1/messages body."""
    max_tokens = integer(body, "max_tokens", 1)
    if max_tokens is None:
        raise bad("max_tokens", "is required: the most tokens the reply may have")
    chat = chat_of(body)
    sampling = _sampling(body, max_tokens if cap is None else min(max_tokens, cap))
    return Generation(ChatRequest(messages=chat.messages, sampling=sampling, continue_final=chat.continue_final),
                      stream=flag(body, "stream"))


def chat_of(body: dict) -> ChatRequest:
    """The conversation of a /v1/messages or /v1/messages/count_tokens body: the system
    prompt first, then the turns."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad("model", f"must be a string, got {shown(model)}")
    if body.get("tools"):
        raise bad("tools", "are not supported by this server yet")
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise bad("metadata", f"must be an object, got {shown(metadata)}")
    turns = _turns(body)
    system = body.get("system")
    messages = turns if system is None else ({"role": "system", "content": content_text(system, "system", "system")},
                                             *turns)
    return ChatRequest(messages=messages, continue_final=turns[-1]["role"] == "assistant")


def _turns(body: dict) -> tuple[dict, ...]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("messages", f"must be a non-empty list of {{role, content}} objects, got {shown(messages)}")
    turns = []
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise bad(where, f"must be an object with role and content, got {shown(message)}")
        role = message.get("role")
        if role not in ROLES:
            raise bad(f"{where}.role", f"must be \"user\" or \"assistant\", got {shown(role)}")
        content = message.get("content")
        if content is None:
            raise bad(f"{where}.content", "is required: a string or a list of text blocks")
        if role == "user" and isinstance(content, list) and any(_is_image(block) for block in content):
            turns.append({"role": role, "content": _blocks(content, f"{where}.content")})
        else:
            turns.append({"role": role, "content": content_text(content, role, f"{where}.content")})
    within_limit(turns, "messages")
    return tuple(turns)


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "image"


def _blocks(content: list, where: str) -> list[dict]:
    """A user turn's text and image blocks as the engine's parts, in their order."""
    parts: list[dict] = []
    for i, block in enumerate(content):
        at = f"{where}.{i}"
        if not _is_image(block):
            text = block.get("text") if isinstance(block, dict) else None
            if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(text, str):
                raise bad(at, "must be a text block {type: \"text\", text} or an image block")
            parts.append({"type": "text", "text": valid_text(text, f"{at}.text")})
            continue
        source = block.get("source")
        kind = source.get("type") if isinstance(source, dict) else None
        if kind != "base64":
            why = NO_FETCH if kind == "url" else "images are taken as base64 sources only"
            raise bad(f"{at}.source", f"must be {{type: \"base64\", media_type, data}} ({why}), "
                                      f"got type {shown(kind)}")
        assert isinstance(source, dict)
        parts.append(base64_part(source.get("media_type"), source.get("data"), f"{at}.source"))
    return parts


def _sampling(body: dict, max_tokens: int) -> SamplingParams:
    stop = body.get("stop_sequences")
    if stop is not None and not isinstance(stop, list):
        raise bad("stop_sequences", f"must be a list of strings, got {shown(stop)}")
    return checked(SamplingParams(**api_sampling(body, ANTHROPIC), max_tokens=max_tokens,
                                  stop=stop_strings(stop or [], "stop_sequences", MAX_STOP_SEQUENCES)))
