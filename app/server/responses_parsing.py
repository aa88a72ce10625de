"""An OpenAI Responses body (already JSON) to what the route runs, validated field by field
with the readers of request_parsing.py.

`input` is a string (one user turn) or a list of message items ({role, content}, with or
without `type: "message"`), each content a string or input_text/output_text parts; roles
user, assistant, system and developer (as system). `instructions` becomes the first system
message; as OpenAI, it is not carried over to a response that continues this one. Items of
other types (images, files, function calls, reasoning, item references) and `tools` are
refused with a 400 naming them rather than dropped. Unknown fields are ignored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.server.errors import ApiError
from app.server.request_parsing import ROLES, bad, flag, integer, number, shown, valid_text
from inference import UNLIMITED, RequestError, SamplingParams

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
    temperature = number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = number(body, "top_p", 1.0, 0.0, 1.0, lo_open=True)
    return ResponseAsk(
        input=input_messages(body.get("input")),
        sampling=_sampling(body, _max_tokens(asked, cap), temperature, top_p),
        instructions=None if instructions is None else valid_text(instructions, "instructions"),
        previous_response_id=previous_id(body.get("previous_response_id")),
        store=True if body.get("store") is None else flag(body, "store"),
        stream=flag(body, "stream"),
        max_output_tokens=asked,
        temperature=temperature,
        top_p=top_p,
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
    return tuple(_item(item, f"input[{i}]") for i, item in enumerate(value))


def _item(item: Any, where: str) -> dict:
    if not isinstance(item, dict):
        raise bad(where, f"must be a message item {{role, content}}, got {shown(item)}")
    kind = item.get("type", "message")
    if kind != "message":
        raise bad(f"{where}.type", f"must be \"message\" (this server reads text messages only), got {shown(kind)}")
    role = item.get("role")
    if role not in ROLES:
        raise bad(f"{where}.role", f"must be one of {', '.join(ROLES)}, got {shown(role)}")
    return {"role": ROLES[role], "content": _content(item.get("content"), f"{where}.content")}


def _content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return valid_text(content, where)
    if not isinstance(content, list):
        raise bad(where, f"must be a string or a list of input_text parts, got {shown(content)}")
    return "".join(_part(part, f"{where}[{i}]") for i, part in enumerate(content))


def _part(part: Any, where: str) -> str:
    if not isinstance(part, dict):
        raise bad(where, f"must be an object {{type, text}}, got {shown(part)}")
    if part.get("type") not in TEXT_PARTS:
        raise bad(f"{where}.type", f"must be \"input_text\" or \"output_text\" (this server reads text only), "
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


def _sampling(body: dict, max_tokens: int, temperature: float, top_p: float) -> SamplingParams:
    params = SamplingParams(
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        ignore_eos=flag(body, "ignore_eos"),  # the extension the other routes take (vLLM's)
        repeat_penalty=1.0,
        top_k=0,
        min_p=0.0,
    )
    try:
        params.validate()
    except RequestError as exc:
        raise ApiError(400, str(exc)) from None
    return params
