"""Server-sent events as OpenAI-compatible servers stream them: the JSON payloads of `data:`
fields, up to `[DONE]`. No SSE client library is installed; this is the part of the format
those servers use (data fields, blank-line event ends, comments), nothing more."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Event:
    payload: dict
    field: str = "data"  # "error" for llama.cpp's server, which names its error events so; "done"

    @property
    def done(self) -> bool:
        return self.field == "done"


DONE = Event({}, "done")  # [DONE]: the server ended the stream on purpose


def events(lines: Iterable[str]) -> Iterator[Event]:
    """Each event's JSON, and DONE last at `data: [DONE]`, so that a caller can tell a stream
    that ended from one whose connection closed (a server that died mid-reply)."""
    field = "data"
    data: list[str] = []
    for line in lines:
        if not line:  # an event ends at a blank line
            if data:
                yield _event(field, data)
            field, data = "data", []
            continue
        if line.startswith(":"):  # a comment (keep-alive pings)
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name in ("data", "error"):
            if name == "data" and value.strip() == "[DONE]":
                yield DONE
                return
            field = name
            data.append(value)
    if data:  # the last event without its blank line
        yield _event(field, data)


def _event(field: str, data: list[str]) -> Event:
    try:
        payload = json.loads("\n".join(data))
    except ValueError:
        raise ValueError(f"the server sent an event that is not JSON: {_clip(chr(10).join(data))}") from None
    if not isinstance(payload, dict):
        raise ValueError(f"the server sent an event that is not a JSON object: {_clip(str(payload))}")
    return Event(payload, field)


def _clip(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
