"""An OpenAI Responses body (already JSON) to what the route runs, validated field by field
with the readers of calls/parsing.py.

`input` is a string (one user turn) or a list of message items ({role, content}, with or
without `type: "message"`), each content a string or input_text/output_text parts, and a
user message's input_image parts (a data: URL in image_url; calls/images.py makes them the
engine's part; a remote URL or a file_id is refused: this server fetches nothing); roles
user, assistant, system and developer (as system). `instructions` becomes the first system
message; as OpenAI, it is not carried over to a response that continues this one. Items of
other types (files, function calls, reasoning, item references) and `tools` are
refused with a 400 naming them rather than dropped. Unknown fields are ignored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.server.calls.images import NO_FETCH, data_url_part, within_limit
from app.server.calls.parsing import ROLES, api_sampling, bad, checked, flag, integer, shown, valid_text
from inference import RESPONSES, UNLIMITED, SamplingParams

TEXT_PARTS = ("input_text", "output_text")
ID_PREFIX = "resp_"


@dataclass(frozen=True)
class ResponseAsk:
    """What a POST /v1/responses asked, before its previous response is looked up."""

    input: tuple[dict, ...]  # this request's turns as chat messages {role, content}
    sampling: SamplingParams
    instructions: str | None = None
    previous_response_id: str | None = None
    store: bool = True  # OpenAI's default
    stream: bool = False
    max_output_tokens: int | None = None  # as asked (the response object repeats it)
    temperature: float = 1.0
    top_p: float = 1.0


def response_ask(body: dict, cap: int | None) -> ResponseAsk:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad("model", f"must be a string, got {shown(model)}")
    if body.get("tools"):
        raise bad("tools", "are not supported on /v1/responses by this server yet")
    _text_format(body)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise bad("instructions", f"must be a string, got {shown(instructions)}")
    asked = integer(body, "max_output_tokens", 1)
    sampling = checked(SamplingParams(**api_sampling(body, RESPONSES), max_tokens=_max_tokens(asked, cap)))
    return ResponseAsk(
        input=input_messages(body.get("input")),
        sampling=sampling,
        instructions=None if instructions is None else valid_text(instructions, "instructions"),
        previous_response_id=previous_id(body.get("previous_response_id")),
        store=True if body.get("store") is None else flag(body, "store"),
        stream=flag(body, "stream"),
        max_output_tokens=asked,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
    )


def previous_id(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith(ID_PREFIX):
        raise bad("previous_response_id", f"must be a response id \"{ID_PREFIX}...\", got {shown(value)}")
    return value


def input_messages(value: Any) -> tuple[dict, ...]:
    if isinstance(value, str):
        if not value:
            raise bad("input", "must not be empty")
        return ({"role": "user", "content": valid_text(value, "input")},)
    if not isinstance(value, list) or not value:
        raise bad("input", f"must be a string or a non-empty list of message items, got {shown(value)}")
    items = tuple(_item(item, f"input[{i}]") for i, item in enumerate(value))
    within_limit(items, "input")
    return items


def _item(item: Any, where: str) -> dict:
    if not isinstance(item, dict):
        raise bad(where, f"must be a message item {{role, content}}, got {shown(item)}")
    kind = item.get("type", "message")
    if kind != "message":
        raise bad(f"{where}.type", f"must be \"message\" (this server reads text messages only), got {shown(kind)}")
    role = item.get("role")
    if role not in ROLES:
        raise bad(f"{where}.role", f"must be one of {', '.join(ROLES)}, got {shown(role)}")
    content = item.get("content")
    if role == "user" and isinstance(content, list) and any(_is_image(part) for part in content):
        return {"role": "user", "content": _parts(content, f"{where}.content")}
    return {"role": ROLES[role], "content": _content(content, f"{where}.content")}


def _content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return valid_text(content, where)
    if not isinstance(content, list):
        raise bad(where, f"must be a string or a list of input_text parts, got {shown(content)}")
    return "".join(_part(part, f"{where}[{i}]") for i, part in enumerate(content))


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "input_image"


def _parts(content: list, where: str) -> list[dict]:
    """A user message's text and input_image parts as the engine's parts, in their order."""
    parts: list[dict] = []
    for i, part in enumerate(content):
        at = f"{where}[{i}]"
        if not _is_image(part):
            parts.append({"type": "text", "text": _part(part, at)})
        elif part.get("image_url") is None:
            got = "a file_id" if part.get("file_id") is not None else "no image_url"
            raise bad(f"{at}.image_url", f"must be a data: URL (data:image/png;base64,...), got {got}: {NO_FETCH} "
                                         f"or files")
        else:
            parts.append(data_url_part(part["image_url"], f"{at}.image_url"))
    return parts


def _part(part: Any, where: str) -> str:
    if not isinstance(part, dict):
        raise bad(where, f"must be an object {{type, text}}, got {shown(part)}")
    if part.get("type") not in TEXT_PARTS:
        raise bad(f"{where}.type", f"must be \"input_text\" or \"output_text\" (or \"input_image\" in a user message), "
                                   f"got {shown(part.get('type'))}")
    text = part.get("text")
    if not isinstance(text, str):
        raise bad(f"{where}.text", f"must be a string, got {shown(text)}")
    return valid_text(text, f"{where}.text")


def _text_format(body: dict) -> None:
    """text.format: plain text only (json_schema follows the structured output work)."""
    text = body.get("text")
    if text is None:
        return
    fmt = text.get("format") if isinstance(text, dict) else None
    kind = fmt.get("type") if isinstance(fmt, dict) else "text" if fmt is None and isinstance(text, dict) else fmt
    if kind != "text":
        raise bad("text.format", f"must be {{\"type\": \"text\"}} on this server, got {shown(kind)}")


def _max_tokens(asked: int | None, cap: int | None) -> int:
    if cap is None:
        return asked if asked is not None else UNLIMITED
    return cap if asked is None else min(asked, cap)

