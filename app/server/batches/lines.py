"""A batch's input file checked line by line, as OpenAI checks it while a batch is
`validating`: each line must be a JSON object {custom_id, method: "POST", url, body} with
the batch's endpoint as url, a custom_id no other line has, and a body naming a served
model (or none: the server's default). One batch runs on one model, as on OpenAI: a line
naming another model than the lines before it is an error too. One bad line fails the whole
batch before anything runs, with every bad line listed (its number, a code, the field, what
is wrong), as OpenAI's `errors.data` does: nothing is half run, and the input file is kept
for the fix.

What a body asks (its messages, its sampling) is checked later, request by request, by the
same parser as the live route: a bad body is that request's 400 in the error file."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from storage import ItemInput

MAX_REQUESTS = 50_000  # OpenAI's limit for one batch
MAX_ERRORS = 100  # listed in errors.data; past it the batch fails all the same
FIELDS = ("custom_id", "method", "url", "body")


@dataclass
class Checked:
    items: list[ItemInput] = field(default_factory=list)  # fields: the body; custom_id its own
    errors: list[dict] = field(default_factory=list)  # OpenAI's BatchError: code, line, message, param
    model: str | None = None  # the batch's model (the served name), once a line gave it


@dataclass(frozen=True)
class Served:
    """The names a batch's lines may give: default for a line naming none; resolve: the
    served model a name (or an alias) means, None if none; names: listed in the errors."""

    default: str
    resolve: Callable[[str], str | None]
    names: Sequence[str]

    @classmethod
    def one(cls, model_id: str) -> Served:
        """A server of one model: that name alone."""
        return cls(model_id, lambda name: name if name == model_id else None, (model_id,))


def batch_error(code: str, message: str, line: int | None = None, param: str | None = None) -> dict:
    return {"code": code, "line": line, "message": message, "param": param}


def check_lines(data: bytes, endpoint: str, served: Served | str) -> Checked:
    """served: the models a line may name (a str: that one model alone)."""
    if isinstance(served, str):
        served = Served.one(served)
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
        request, problem = _request(line, number, endpoint, served, seen, checked)
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


def _request(line: str, number: int, endpoint: str, served: Served, seen: dict[str, int],
             checked: Checked) -> tuple[ItemInput | None, dict | None]:
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
    named = body.get("model")
    model = served.resolve(named) if isinstance(named, str) else served.default if named is None else None
    if model is None:
        names = ", ".join(repr(n) for n in served.names)
        where = f"this server serves {names}" if len(served.names) == 1 else f"served: {names}"
        return None, batch_error("model_not_found", f"model {named!r} is not served here; {where}", number,
                                 "body.model")
    if checked.model is not None and model != checked.model:
        said = f"{named!r}" if named is not None else f"no model (the default, {served.default!r})"
        return None, batch_error("mismatched_model",
                                 f"this line names {said} but the lines before it {checked.model!r}: one batch "
                                 f"runs on one model (make one batch per model; served: "
                                 f"{', '.join(served.names)})", number, "body.model")
    checked.model = model
    return ItemInput(fields=body, custom_id=custom_id), None
