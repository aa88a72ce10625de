"""The chat answer of a call that offered tools: OpenAI's chat Reply (reply.py), with
a reply that calls (in the request's tool format, app/tools/formats) sent as message.tool_calls, finish_reason
"tool_calls", and the prose it wrote before its calls (a Hermes model's "Let me look that
up.") as its content: OpenAI allows both.

Streaming: the reasoning (<think>...) goes out as reasoning_content as it comes; the answer
as content up to where a call may begin (the format's call_start: for most formats the
reply's start, so a reply that begins as a call might, with a brace, a bracket, a tag or a
fence, is held whole; for Hermes the first <tool_call>). What is held goes out when the
reply ends, either as delta.tool_calls in OpenAI's shape (per call a chunk with its index,
id, type and name and empty arguments, then the arguments in fragments) or, when it was no
call after all, as one content chunk. A call without tools is the plain Reply's, unchanged."""

from __future__ import annotations

from collections.abc import Iterator

from app.chats.reasoning import split_reasoning
from app.server.calls.engine_bridge import ChoiceDelta
from app.server.calls.reply import Call
from app.server.http.errors import ApiError
from app.server.http.streaming import event
from app.server.openai import format as fmt
from app.server.openai.reply import CHAT as PLAIN_CHAT
from app.server.openai.reply import OpenAiReply
from app.tools import ToolCall

FRAGMENT = 24  # characters of arguments per streamed chunk


class ToolReply:
    def __init__(self, plain: OpenAiReply) -> None:
        self.plain = plain

    def answer(self, call: Call) -> dict:
        payload = self.plain.answer(call)
        if call.gen.tools is None:
            return payload
        for choice, tally in zip(payload["choices"], call.tallies):
            found = call.gen.tool_format.split(tally.text, call.gen.tools)
            if found:
                prose, calls = found
                reasoning = choice["message"].get("reasoning_content")
                choice["message"] = {"role": "assistant", "content": split_reasoning(prose).answer or None,
                                     "tool_calls": [c.openai() for c in calls]}
                if reasoning is not None:  # what the model thought before calling
                    choice["message"]["reasoning_content"] = reasoning
                choice["finish_reason"] = "tool_calls"
        return payload

    def opening(self, call: Call) -> Iterator[bytes]:
        return self.plain.opening(call)

    def text(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        tally = call.tallies[item.index]
        if call.gen.tools is None:
            yield from self.plain.text(call, item)
            return
        start = call.gen.tool_format.call_start(tally.answer)
        end = len(tally.answer) if start is None else max(start, tally.sent)
        content, tally.sent = tally.answer[tally.sent:end], end
        if content == tally.piece.answer:  # nothing held, nor let go: as without tools
            yield from self.plain.text(call, item)
        elif content or tally.piece.reasoning:
            yield self._chunk(call, item.index, text=content, reasoning=tally.piece.reasoning)

    def finish(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        tally = call.tallies[item.index]
        if call.gen.tools is None:
            yield from self.plain.finish(call, item)
            return
        found = call.gen.tool_format.split(tally.text, call.gen.tools)
        if found:  # its prose went out as it came
            yield from self._calls(call, item.index, found[1])
            yield self._chunk(call, item.index, finish="tool_calls")
            return
        if tally.sent < len(tally.answer):  # what was held is text after all
            yield self._content(call, item.index, tally.answer[tally.sent:])
            tally.sent = len(tally.answer)
        yield from self.plain.finish(call, item)

    def closing(self, call: Call) -> Iterator[bytes]:
        return self.plain.closing(call)

    def error(self, call: Call, error: ApiError) -> bytes:
        return self.plain.error(call, error)

    def _calls(self, call: Call, index: int, calls: tuple[ToolCall, ...]) -> Iterator[bytes]:
        for n, tool_call in enumerate(calls):
            head = {"index": n, "id": tool_call.id, "type": "function",
                    "function": {"name": tool_call.name, "arguments": ""}}
            yield self._chunk(call, index, tool_calls=[head])
            args = tool_call.arguments
            for start in range(0, len(args), FRAGMENT):
                piece = {"index": n, "function": {"arguments": args[start:start + FRAGMENT]}}
                yield self._chunk(call, index, tool_calls=[piece])

    def _content(self, call: Call, index: int, text: str) -> bytes:
        return self._chunk(call, index, text=text)

    def _chunk(self, call: Call, index: int, text: str | None = None, finish: str | None = None,
               tool_calls: list | None = None, reasoning: str | None = None) -> bytes:
        payload = fmt.chunk(fmt.CHAT, call.id, call.model, index, text, finish, with_usage=call.gen.include_usage,
                            reasoning=reasoning)
        if tool_calls is not None:
            payload["choices"][0]["delta"]["tool_calls"] = tool_calls
        return event(payload)


CHAT = ToolReply(PLAIN_CHAT)
