"""A batch's input file checked line by line, as OpenAI checks it while a batch is
`validating`: each line must be a JSON object {custom_id, method: "POST", url, body} with
the batch's endpoint as url, a custom_id no other line has, and a body naming the served
model (or none). One bad line fails the whole batch before anything runs, with every bad
line listed (its number, a code, the field, what is wrong), as OpenAI's `errors.data` does:
nothing is half run, and the input file is kept for the fix.

What a body asks (its messages, its sampling) is checked later, request by request, by the
same parser as the live route: a bad body is that request's 400 in the error file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from storage import ItemInput

MAX_REQUESTS = 50_000  # OpenAI's limit for one batch
MAX_ERRORS = 100  # listed in errors.data; past it the batch fails all the same
FIELDS = ("custom_id", "method", "url", "body")


@dataclass
class Checked:
    items: list[ItemInput] = field(default_factory=list)  # fields: the body; custom_id its own
    errors: list[dict] = field(default_factory=list)  # OpenAI's BatchError: code, line, message, param


def batch_error(code: str, message: str, line: int | None = None, param: str | None = None) -> dict:
    return {"code": code, "line": line, "message": message, "param": param}


def check_lines(data: bytes, endpoint: str, model_id: str) -> Checked:
    checked = Checked()
    seen: dict[str, int] = {}
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        checked.errors.append(batch_error("invalid_file_format", f"the file is not UTF-8 text (byte {exc.start})"))
        return checked
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        if len(checked.items) >= MAX_REQUESTS:
            checked.errors.append(batch_error("too_many_requests",
                                              f"a batch holds at most {MAX_REQUESTS} requests", number))
            break
        request, problem = _request(line, number, endpoint, model_id, seen)
        if problem is not None:
            checked.errors.append(problem)
            if len(checked.errors) >= MAX_ERRORS:
                break
        elif request is not None:
            checked.items.append(request)
    if not checked.items and not checked.errors:
        checked.errors.append(batch_error("empty_file", "the input file holds no request (one JSON object a line)"))
    if checked.errors:
        checked.items = []
    return checked


def _request(line: str, number: int, endpoint: str, model_id: str,
             seen: dict[str, int]) -> tuple[ItemInput | None, dict | None]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, batch_error("invalid_json_line", f"this line is not JSON: {exc.msg} at column {exc.colno}",
                                 number)
    if not isinstance(row, dict):
        return None, batch_error("invalid_json_line", "this line is not a JSON object", number)
    for name in FIELDS:
        if name not in row:
            return None, batch_error("missing_required_parameter", f"the line has no {name}", number, name)
    custom_id = row["custom_id"]
    if not isinstance(custom_id, str) or not custom_id:
        return None, batch_error("invalid_value", "custom_id must be a non-empty string", number, "custom_id")
    if custom_id in seen:
        return None, batch_error("duplicate_custom_id",
                                 f"custom_id {custom_id!r} is also on line {seen[custom_id]}; each must be unique",
                                 number, "custom_id")
    seen[custom_id] = number
    if row["method"] != "POST":
        return None, batch_error("invalid_value", f"method must be POST, got {row['method']!r}", number, "method")
    if row["url"] != endpoint:
        return None, batch_error("mismatched_endpoint",
                                 f"url {row['url']!r} is not this batch's endpoint {endpoint!r}", number, "url")
    body = row["body"]
    if not isinstance(body, dict):
        return None, batch_error("invalid_value", "body must be a JSON object (the request's body)", number, "body")
    model = body.get("model")
    if model is not None and model != model_id:
        return None, batch_error("model_not_found",
                                 f"model {model!r} is not served here; this server serves {model_id!r}",
                                 number, "body.model")
    return ItemInput(fields=body, custom_id=custom_id), None
