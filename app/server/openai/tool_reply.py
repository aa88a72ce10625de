"""The chat answer of a call that offered tools: OpenAI's chat Reply (reply.py), with
a reply that is a call (in the request's tool format, app/tools/formats) sent as message.tool_calls, finish_reason
"tool_calls".

Streaming: a reply that begins as a call might (a brace, a bracket, a tag, a fence) is held
back until it ends; then its reasoning (<think>...) goes out as reasoning_content and the
rest either as delta.tool_calls in OpenAI's shape (per call a chunk with its index, id,
type and name and empty arguments, then the arguments in fragments) or, when it was no call
after all, as one content chunk. A reply that begins as
prose streams as it comes. A call without tools is the plain Reply's, unchanged."""

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
            calls = call.gen.tool_format.parse(tally.text, call.gen.tools)
            if calls:
                reasoning = choice["message"].get("reasoning_content")
                choice["message"] = {"role": "assistant", "content": None,
                                     "tool_calls": [c.openai() for c in calls]}
                if reasoning is not None:  # what the model thought before calling
                    choice["message"]["reasoning_content"] = reasoning
                choice["finish_reason"] = "tool_calls"
        return payload

    def opening(self, call: Call) -> Iterator[bytes]:
        return self.plain.opening(call)

    def text(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        if call.gen.tools is None:
            yield from self.plain.text(call, item)
            return
        text = call.tallies[item.index].text
        if call.gen.tool_format.might_be_call(text):
            return  # held back: sent by finish()
        before = text[: len(text) - len(item.delta.text)]
        if before.strip():
            yield from self.plain.text(call, item)
        else:  # the first visible text: what was held (whitespace) goes with it
            yield self._content(call, item.index, text)

    def finish(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        tally = call.tallies[item.index]
        if call.gen.tools is None or not call.gen.tool_format.might_be_call(tally.text):
            yield from self.plain.finish(call, item)
            return
        split = split_reasoning(tally.text)
        if split.reasoning:
            yield self._chunk(call, item.index, reasoning=split.reasoning)
        calls = call.gen.tool_format.parse(tally.text, call.gen.tools)
        if calls:
            yield from self._calls(call, item.index, calls)
            yield self._chunk(call, item.index, finish="tool_calls")
            return
        if split.answer:
            yield self._content(call, item.index, split.answer)
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
