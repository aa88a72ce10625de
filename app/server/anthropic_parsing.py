"""An Anthropic Messages body (already JSON) to what the engine runs, validated field by
field with the readers of request_parsing.py.

As Anthropic: max_tokens is required; system is a string or text blocks; messages alternate
user and assistant turns of a string or text blocks, and a last assistant turn is a prefill
the reply continues; temperature is 0..1 (default 1). Blocks of any other type (images,
tool_use, tool_result, documents) and `tools` are refused with a 400 naming them, rather
than dropped: a reply that silently ignored them would look like an answer to them.
Unknown fields are ignored; metadata is checked to be an object and not used."""

from __future__ import annotations

from app.server.errors import ApiError
from app.server.request_parsing import (
    Generation,
    bad,
    content_text,
    flag,
    integer,
    number,
    shown,
    stop_strings,
)
from inference import ChatRequest, RequestError, SamplingParams

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
        turns.append({"role": role, "content": content_text(content, role, f"{where}.content")})
    return tuple(turns)


def _sampling(body: dict, max_tokens: int) -> SamplingParams:
    stop = body.get("stop_sequences")
    if stop is not None and not isinstance(stop, list):
        raise bad("stop_sequences", f"must be a list of strings, got {shown(stop)}")
    params = SamplingParams(
        temperature=number(body, "temperature", 1.0, 0.0, 1.0),
        top_p=number(body, "top_p", 1.0, 0.0, 1.0, lo_open=True),
        top_k=integer(body, "top_k", 0) or 0,  # 0: no top-k cut
        max_tokens=max_tokens,
        stop=stop_strings(stop or [], "stop_sequences", MAX_STOP_SEQUENCES),
        ignore_eos=flag(body, "ignore_eos"),  # the extension the OpenAI routes take (vLLM's): run to max_tokens
        repeat_penalty=1.0,
        min_p=0.0,
    )
    try:
        params.validate()
    except RequestError as exc:
        raise ApiError(400, str(exc)) from None
    return params
