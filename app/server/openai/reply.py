"""OpenAI's chat and completions answers as a Reply (calls/reply.py): the JSON completion, or
chunks (a role chunk per choice first on chat), a finish chunk per choice, the usage chunk
when asked, then `data: [DONE]`."""

from __future__ import annotations

from collections.abc import Iterator

from app.server.calls.engine_bridge import ChoiceDelta
from app.server.calls.reply import Call
from app.server.http.errors import ApiError
from app.server.http.streaming import DONE, event
from app.server.openai import format as fmt


class OpenAiReply:
    def __init__(self, api: fmt.Api) -> None:
        self.api = api

    def answer(self, call: Call) -> dict:
        return fmt.completion(self.api, call.id, call.model, call.tallies, call.prompt_tokens,
                              with_logprobs=call.gen.logprobs is not None)

    def opening(self, call: Call) -> Iterator[bytes]:
        if self.api.chat:
            for index in range(call.gen.n):
                yield self._chunk(call, index, None, role=True)

    def text(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        delta = item.delta
        if not self.api.chat:
            if delta.text or delta.logprobs:
                yield self._chunk(call, item.index, delta.text, logprobs=self._logprobs(call, item))
            return
        piece = call.tallies[item.index].piece  # the chat API: reasoning apart from the answer
        if piece.reasoning or piece.answer or delta.logprobs:
            yield self._chunk(call, item.index, piece.answer, logprobs=self._logprobs(call, item),
                              reasoning=piece.reasoning)

    def finish(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        yield self._chunk(call, item.index, None, fmt.finish_reason(item.delta.finish_reason))

    def closing(self, call: Call) -> Iterator[bytes]:
        if call.gen.include_usage:
            yield event(fmt.usage_chunk(self.api, call.id, call.model, fmt.usage(call.tallies, call.prompt_tokens)))
        yield DONE

    def error(self, call: Call, error: ApiError) -> bytes:
        return event(error.payload())

    def _chunk(self, call: Call, index: int, text: str | None, finish: str | None = None, role: bool = False,
               logprobs: dict | None = None, reasoning: str | None = None) -> bytes:
        return event(fmt.chunk(self.api, call.id, call.model, index, text, finish, role, call.gen.include_usage,
                               logprobs, reasoning))

    def _logprobs(self, call: Call, item: ChoiceDelta) -> dict | None:
        if call.gen.logprobs is None or not item.delta.logprobs:
            return None
        offset = len(call.tallies[item.index].text) - len(item.delta.text)  # where this delta's text starts
        return fmt.logprobs_of(self.api, item.delta.logprobs, offset)


CHAT = OpenAiReply(fmt.CHAT)
TEXT = OpenAiReply(fmt.TEXT)
