"""What every API's parser shares: the Generation a body becomes (one call, how to answer
it), and the field readers that validate a body field by field.

Unknown fields are ignored (clients send many); a known field with a wrong type or value is
a 400 naming the field. The sampling fields each API takes, their defaults and ranges are
the engine's table's (SAMPLING_FIELDS, read by api_sampling for every API); a field an API
has no name for is off. Each family's parsing.py reads its own body with these."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from app.server.http.body import is_finite_number
from app.server.http.errors import ApiError
from app.tools import ToolUse
from app.tools.formats import GENERIC, ToolFormat
from inference import (
    SAMPLING_FIELDS,
    ApiKey,
    Bounds,
    ChatRequest,
    RequestError,
    SamplingField,
    SamplingParams,
)

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


@dataclass(frozen=True)
class Generation:
    """One API call: the engine request of its first choice, and how to answer."""

    chat: ChatRequest
    n: int = 1
    stream: bool = False
    include_usage: bool = False
    logprobs: int | None = None  # None: none asked; k: the chosen token's plus k alternatives
    json_object: bool = False  # the output is constrained to JSON (json_object or json_schema)
    prompt_text: str | None = None  # /v1/completions with a text prompt, still to tokenize
    tools: ToolUse | None = None  # the tools the reply may call (openai/tool_request.py)
    tool_format: ToolFormat = GENERIC  # how the reply writes its calls (the model's template's)
    messages_param: str = "messages"  # the body's field the messages came from (its 400s name it)

    def choice(self, index: int) -> ChatRequest:
        """The engine request of choice `index`: the same prompt, seed + index."""
        seed = self.chat.sampling.seed
        if index == 0 or seed is None:
            return self.chat
        return replace(self.chat, sampling=replace(self.chat.sampling, seed=(seed + index) % 2**32))


def bad(param: str, message: str) -> ApiError:
    return ApiError(400, f"{param} {message}", param=param)


# ----- field readers -----------------------------------------------------------------------


def number(body: dict, name: str, default: float, bounds: Bounds) -> float:
    value = body.get(name)
    if value is None:
        return default
    if not is_finite_number(value):
        raise bad(name, f"must be a finite number, got {shown(value)}")
    if value not in bounds:
        ends = [] if bounds.lo is None else [f"{'>' if bounds.lo_open else '>='} {bounds.lo:g}"]
        ends += [] if bounds.hi is None else [f"<= {bounds.hi:g}"]
        raise bad(name, f"must be {' and '.join(ends)}, got {value:g}")
    return float(value)


def integer(body: dict, name: str, lo: int, hi: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(name, f"must be an integer, got {shown(value)}")
    if value < lo or (hi is not None and value > hi):
        span = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise bad(name, f"must be {span}, got {value}")
    return value


def flag(body: dict, name: str) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad(name, f"must be true or false, got {shown(value)}")
    return value


def valid_text(value: str, where: str) -> str:
    """A string the engine can tokenize: JSON may escape a lone surrogate ("\\ud800"),
    which is no character and no UTF-8, and would fail deep in tokenizing (a 500)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise bad(where, f"has text that is not valid Unicode (a lone surrogate, {value[exc.start:exc.end]!r} "
                         f"at character {exc.start})") from None
    return value


def shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = repr(value) if isinstance(value, str) else "null" if value is None else str(value).lower() \
        if isinstance(value, bool) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ----- which model, how long it stays loaded -------------------------------------------------


# Ollama's keep_alive: seconds as a number, or a duration string ("10m", "1h", "30s", "-1").
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def keep_alive_of(body: dict) -> float | None:
    """The body's keep_alive in seconds (None: absent); a 400 naming it when unreadable."""
    value = body.get("keep_alive")
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise bad("keep_alive", f"must be seconds or a duration such as \"5m\", \"1h\" or -1, got {shown(value)}")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def model_of(body: dict) -> str | None:
    """The model a body names (None: none, or an empty name)."""
    value = body.get("model")
    if value is not None and not isinstance(value, str):
        raise bad("model", f"must be a string, got {shown(value)}")
    return value or None


# ----- messages ----------------------------------------------------------------------------


def content_text(content: Any, role: str, where: str) -> str:
    if content is None and role == "assistant":  # an assistant turn that only called tools
        return ""
    if isinstance(content, str):
        return valid_text(content, where)
    if not isinstance(content, list):
        raise bad(where, f"must be a string or a list of text parts, got {shown(content)}")
    return "".join(_text_part(part, f"{where}[{i}]") for i, part in enumerate(content))


def _text_part(part: Any, where: str) -> str:
    if not isinstance(part, dict):
        raise bad(where, f"must be an object {{type, text}}, got {shown(part)}")
    if part.get("type") != "text":
        raise bad(f"{where}.type", f"must be \"text\" (or an image in a user turn), got {shown(part.get('type'))}")
    value = part.get("text")
    if not isinstance(value, str):
        raise bad(f"{where}.text", f"must be a string, got {shown(value)}")
    return valid_text(value, f"{where}.text")


# ----- sampling ----------------------------------------------------------------------------


def stop_strings(stop: list, name: str, limit: int) -> tuple[str, ...]:
    """A list of stop strings: at most limit, each a non-empty string of valid text."""
    if len(stop) > limit:
        raise bad(name, f"may hold at most {limit} strings, got {len(stop)}")
    for i, s in enumerate(stop):
        if not isinstance(s, str) or not s:
            raise bad(f"{name}[{i}]", f"must be a non-empty string, got {shown(s)}")
        valid_text(s, f"{name}[{i}]")
    return tuple(stop)


def api_sampling(body: dict, api: str) -> dict[str, Any]:
    """The sampling fields of a request to `api`, by the table: each field the API names,
    read from the body (the API's default when absent; outside its range, a 400 naming
    it), and each it has no name for at the value that turns its sampler off."""
    values: dict[str, Any] = {}
    for field in SAMPLING_FIELDS:
        key = field.apis.get(api)
        if key is not None:
            values[field.name] = _field_value(body, field, key)
        elif field.off is not None:
            values[field.name] = field.off
    return values


def _field_value(body: dict, field: SamplingField, key: ApiKey) -> Any:
    if body.get(key.key) is None:
        return key.default
    bounds = key.bounds or field.bounds
    if field.kind is bool:
        return flag(body, key.key)
    if field.kind is int:
        lo = -(2**63) if bounds.lo is None else int(bounds.lo)
        value = integer(body, key.key, lo, None if bounds.hi is None else int(bounds.hi))
        return value % key.wrap if key.wrap and value is not None else value
    return number(body, key.key, key.default, bounds)


def checked(params: SamplingParams) -> SamplingParams:
    """params, or a 400 for what the fields cannot say alone (a grammar with ignore_eos)."""
    try:
        params.validate()
    except RequestError as exc:
        raise ApiError(400, str(exc)) from None
    return params
