"""OpenAI Responses answers: the response object, and the Reply (calls/reply.py) that writes a
call as one object or as the Responses event stream.

A response: {id "resp_...", object "response", created_at, status, model, output: [one
message item {id "msg_...", type "message", role "assistant", status, content: [one
output_text part]}], usage {input_tokens, input_tokens_details {cached_tokens},
output_tokens, output_tokens_details, total_tokens}, incomplete_details} and the request's
settings it repeats. A stream, each event with its `event:` line and a sequence_number from
0: response.created, response.in_progress, response.output_item.added,
response.content_part.added, response.output_text.delta..., response.output_text.done,
response.content_part.done, response.output_item.done, then response.completed (or
response.incomplete, as OpenAI, for a reply cut at max_output_tokens or by the context). A
failure after the stream began is an `error` event (the SDK raises it)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

from app.server.calls.engine_bridge import ChoiceDelta
from app.server.calls.reply import Call, ChoiceTally
from app.server.http.errors import ApiError
from app.server.http.streaming import named_event
from inference import FinishReason
from storage import ResponseRecord

ITEM_PREFIX = "msg_"
_STATUS = {FinishReason.STOP: "completed", FinishReason.LENGTH: "incomplete",
           FinishReason.CONTEXT_FULL: "incomplete", FinishReason.CANCELLED: "cancelled"}


@dataclass(frozen=True)
class Settings:
    """What a response object repeats of its request."""

    instructions: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    previous_response_id: str | None = None
    store: bool = True


def item_id(response_id: str) -> str:
    """The message item's id, derived from its response's: the same on every read."""
    return ITEM_PREFIX + response_id.removeprefix("resp_")


def usage(input_tokens: int, output_tokens: int, cached_tokens: int) -> dict:
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens}


def message_item(response_id: str, text: str | None, status: str) -> dict:
    """text None: the item as it opens, before its content part."""
    content = [] if text is None else [_part(text)]
    return {"id": item_id(response_id), "type": "message", "role": "assistant", "status": status, "content": content}


def response_object(response_id: str, created_at: int, model: str, settings: Settings, status: str,
                    output: list[dict], used: dict | None) -> dict:
    return {
        "id": response_id, "object": "response", "created_at": created_at, "status": status,
        "error": None, "model": model, "output": output, "usage": used,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": settings.instructions, "max_output_tokens": settings.max_output_tokens,
        "temperature": settings.temperature, "top_p": settings.top_p,
        "previous_response_id": settings.previous_response_id, "store": settings.store,
        "parallel_tool_calls": False, "tool_choice": "none", "tools": [], "truncation": "disabled",
        "text": {"format": {"type": "text"}}, "metadata": {},
    }


def stored_object(record: ResponseRecord) -> dict:
    """A stored response as GET /v1/responses/{id} answers it."""
    created = 0
    if record.created_at is not None:  # SQLite gives back a naive time, written in UTC
        created = int(record.created_at.replace(tzinfo=record.created_at.tzinfo or timezone.utc).timestamp())
    settings = Settings(previous_response_id=record.previous_response_id)
    output = [message_item(record.id, record.output_text, record.status)]
    return response_object(record.id, created, record.model, settings, record.status, output, record.usage)


def _part(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _status(tally: ChoiceTally) -> str:
    return _STATUS.get(tally.finish or FinishReason.STOP, "completed")


class ResponsesReply:
    """One call's writer (it counts the stream's sequence numbers). Once the reply ended,
    `saved` holds what to store for a later previous_response_id; the route writes it."""

    def __init__(self, response_id: str, settings: Settings, own_input: tuple[dict, ...]) -> None:
        self.id = response_id
        self.created_at = int(time.time())
        self.settings = settings
        self.own_input = own_input  # this request's turns (a previous response's are stored with it)
        self.saved: ResponseRecord | None = None
        self._sequence = 0

    def answer(self, call: Call) -> dict:
        return self._final(call, call.tallies[0])

    def opening(self, call: Call) -> Iterator[bytes]:
        opened = self._object(call, "in_progress", [], None)
        yield self._event("response.created", response=opened)
        yield self._event("response.in_progress", response=opened)
        yield self._event("response.output_item.added", output_index=0,
                          item=message_item(self.id, None, "in_progress"))
        yield self._event("response.content_part.added", **self._where(), part=_part(""))

    def text(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        if item.delta.text:
            yield self._event("response.output_text.delta", **self._where(), delta=item.delta.text, logprobs=[])

    def finish(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        tally = call.tallies[item.index]
        final = self._final(call, tally)
        yield self._event("response.output_text.done", **self._where(), text=tally.text, logprobs=[])
        yield self._event("response.content_part.done", **self._where(), part=_part(tally.text))
        yield self._event("response.output_item.done", output_index=0, item=final["output"][0])
        end = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        yield self._event(end, response=final)

    def closing(self, call: Call) -> Iterator[bytes]:
        return iter(())

    def error(self, call: Call, error: ApiError) -> bytes:
        return self._event("error", **error.payload())

    def _final(self, call: Call, tally: ChoiceTally) -> dict:
        """The finished response; what to store of it is kept in `saved`."""
        status = _status(tally)
        used = usage(call.prompt_tokens, tally.completion_tokens, tally.cached_tokens or 0)
        if status in ("completed", "incomplete"):
            self.saved = ResponseRecord(id=self.id, model=call.model, input=list(self.own_input),
                                        output_text=tally.text, status=status, usage=used,
                                        previous_response_id=self.settings.previous_response_id,
                                        # the moment the client was told, not the end of the reply
                                        created_at=datetime.fromtimestamp(self.created_at, timezone.utc))
        return self._object(call, status, [message_item(self.id, tally.text, status)], used)

    def _object(self, call: Call, status: str, output: list[dict], used: dict | None) -> dict:
        return response_object(self.id, self.created_at, call.model, self.settings, status, output, used)

    def _where(self) -> dict:
        return {"item_id": item_id(self.id), "output_index": 0, "content_index": 0}

    def _event(self, name: str, **fields: object) -> bytes:
        self._sequence += 1
        return named_event(name, {"type": name, **fields, "sequence_number": self._sequence - 1})
