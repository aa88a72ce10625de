"""Anthropic's Messages answers as a Reply (calls/reply.py).

A message: {id, type "message", role "assistant", model, content: [one text block],
stop_reason, stop_sequence, usage {input_tokens, output_tokens}}. A stream, each event with
its `event:` line, in Anthropic's order: message_start (usage with the input tokens),
content_block_start, ping, content_block_delta (text_delta)..., content_block_stop,
message_delta (stop_reason, stop_sequence, usage with the output tokens), message_stop. A
failure after the stream began is an `error` event (the SDK raises it)."""

from __future__ import annotations

from collections.abc import Iterator

from app.engines.finish import anthropic_stop_reason
from app.server.calls.engine_bridge import ChoiceDelta
from app.server.calls.reply import Call, ChoiceTally
from app.server.http.errors import ANTHROPIC_PREFIX, ApiError
from app.server.http.streaming import named_event
from inference import FinishReason

ID_PREFIX = "msg_"


def _stop(tally: ChoiceTally) -> dict:
    reason = anthropic_stop_reason(tally.finish or FinishReason.STOP, tally.stop_string)
    return {"stop_reason": reason, "stop_sequence": tally.stop_string if reason == "stop_sequence" else None}


def _message(call: Call, content: list[dict], output_tokens: int) -> dict:
    return {"id": ID_PREFIX + call.id, "type": "message", "role": "assistant", "model": call.model,
            "content": content, "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": call.prompt_tokens, "output_tokens": output_tokens}}


def _sent(name: str, **fields: object) -> bytes:
    return named_event(name, {"type": name, **fields})


class AnthropicReply:
    """One choice always (the Messages API has no n)."""

    def answer(self, call: Call) -> dict:
        tally = call.tallies[0]
        return {**_message(call, [{"type": "text", "text": tally.text}], tally.completion_tokens), **_stop(tally)}

    def opening(self, call: Call) -> Iterator[bytes]:
        yield _sent("message_start", message=_message(call, [], 0))
        yield _sent("content_block_start", index=0, content_block={"type": "text", "text": ""})
        yield _sent("ping")

    def text(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        if item.delta.text:
            yield _sent("content_block_delta", index=0, delta={"type": "text_delta", "text": item.delta.text})

    def finish(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        tally = call.tallies[item.index]
        yield _sent("content_block_stop", index=0)
        yield _sent("message_delta", delta=_stop(tally), usage={"output_tokens": tally.completion_tokens})
        yield _sent("message_stop")

    def closing(self, call: Call) -> Iterator[bytes]:
        return iter(())

    def error(self, call: Call, error: ApiError) -> bytes:
        return named_event("error", error.payload(ANTHROPIC_PREFIX))


MESSAGES = AnthropicReply()
