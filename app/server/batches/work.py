"""A batch request as a job's item (app/jobs' Work): its body parsed by the live route's own
parser, prepared, run at the engine's spare priority (n choices: n requests), and answered
with the body the live route would have sent, written by its own Reply. A body the route
would refuse (a bad field, a prompt longer than the context) is refused the same way: that
request's status and OpenAI error body, in the error file; the others go on."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from app.jobs import ItemRun
from app.server.calls.parsing import Generation
from app.server.calls.reply import Call, ChoiceTally, Reply
from app.server.http.errors import ApiError
from app.server.openai import reply as openai_reply
from app.server.openai import tool_reply
from app.server.openai.parsing import completion_generation
from app.server.openai.tool_request import tool_chat_generation
from inference import SPARE_PRIORITY, ChatRequest, Delta, EngineClient, FinishReason, RequestError
from storage import ItemRecord, ItemResult

CHAT, COMPLETIONS, EMBEDDINGS = "/v1/chat/completions", "/v1/completions", "/v1/embeddings"
ENDPOINTS = (CHAT, COMPLETIONS, EMBEDDINGS)


class BatchWork:
    def __init__(self, engine: EngineClient, endpoint: str, model_id: str, cap: int | None) -> None:
        self.engine, self.model_id, self.cap = engine, model_id, cap
        self.reply: Reply
        self.build: Callable[[dict, int | None], Generation]
        if endpoint == CHAT:
            info = engine.info
            self.build = partial(tool_chat_generation, template=info.chat_template if info is not None else None)
            self.reply = tool_reply.CHAT
        elif endpoint == COMPLETIONS:
            self.build, self.reply = completion_generation, openai_reply.TEXT
        else:
            raise ValueError(f"no batches for {endpoint}")

    def start(self, item: ItemRecord, request_id: str) -> ItemRun | ItemResult:
        """EngineError (the engine is down) passes: the runner pauses, the item stays pending."""
        try:
            gen = self.build(item.fields, self.cap)
            chat = self._prepared(gen)
        except ApiError as exc:
            return refused(exc, request_id)
        # One JSON answer, never a stream; at spare priority, below every chat and API call.
        gen = replace(gen, chat=replace(chat, priority=SPARE_PRIORITY), prompt_text=None, stream=False)
        chats = [replace(gen.choice(i), request_id=f"{request_id}-{i}") for i in range(gen.n)]
        return BatchRun(Call(request_id, self.model_id, gen, [ChoiceTally() for _ in chats]), chats, self.reply)

    def _prepared(self, gen: Generation) -> ChatRequest:
        chat = gen.chat
        try:
            if gen.prompt_text is not None:
                chat = replace(chat, prompt_tokens=tuple(self.engine.text_tokens(gen.prompt_text)))
            return self.engine.prepare(chat)
        except RequestError as exc:
            raise ApiError(400, str(exc), param="messages" if chat.messages else "prompt") from None


class BatchRun:
    def __init__(self, call: Call, chats: list[ChatRequest], reply: Reply) -> None:
        self.call, self.reply = call, reply
        self.requests: Sequence[ChatRequest] = chats

    def add(self, index: int, delta: Delta) -> None:
        self.call.tallies[index].add(delta)

    def result(self, seconds: float) -> ItemResult:
        call = self.call
        tokens = sum(t.completion_tokens for t in call.tallies)
        for tally in call.tallies:
            if tally.finish is FinishReason.ERROR:
                error = (ApiError(400, tally.error or "the engine refused the request") if tally.tokens == 0
                         else ApiError(500, f"the engine failed mid-reply: {tally.error}"))
                return refused(error, call.id, call.prompt_tokens, tokens, seconds)
            if tally.finish in (FinishReason.INTERRUPTED, FinishReason.CANCELLED):
                error = ApiError(503, f"the reply was cut: {tally.error or 'the engine stopped'}")
                return refused(error, call.id, call.prompt_tokens, tokens, seconds)
        body = self.reply.answer(call)
        first = call.tallies[0].finish
        return ItemResult(answer=json.dumps({"status_code": 200, "request_id": call.id, "body": body}),
                          finish_reason=first.value if first is not None else None, prompt_tokens=call.prompt_tokens,
                          completion_tokens=tokens, seconds=seconds)


def refused(error: ApiError, request_id: str, prompt_tokens: int = 0, completion_tokens: int = 0,
            seconds: float = 0.0) -> ItemResult:
    """The request's failure as the live route answers it: its status and OpenAI error body."""
    response = {"status_code": error.status, "request_id": request_id, "body": error.payload()}
    return ItemResult(answer=json.dumps(response), finish_reason="error", prompt_tokens=prompt_tokens,
                      completion_tokens=completion_tokens, seconds=seconds, error=error.message)
