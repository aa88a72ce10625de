"""A batch request as a job's item (app/jobs' Work): its body parsed by the live route's own
parser, prepared, run at the engine's spare priority (n choices: n requests), and answered
with the body the live route would have sent, written by its own Reply. A body the route
would refuse (a bad field, a prompt longer than the context) is refused the same way: that
request's status and OpenAI error body, in the error file; the others go on.

A /v1/responses line is a Response as the live route makes it: it may continue a stored
response (previous_response_id, read from the server's database) and, unless it says
`store: false`, is stored itself once answered, so a client can go on from a batch's answer
with a live call. A server killed between storing a response and recording its item stores
it again under a new id when the item is redone (the output file names only the second)."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from app.conversations.stored_responses import save_response
from app.jobs import ItemRun
from app.server.calls.parsing import Generation
from app.server.calls.remote_images import fetch_remote_images, names_images_of
from app.server.calls.reply import Call, ChoiceTally, Reply
from app.server.http.errors import ApiError
from app.server.openai import reply as openai_reply
from app.server.openai import tool_reply
from app.server.openai.parsing import completion_generation
from app.server.openai.tool_request import tool_chat_generation
from app.server.responses.call import NOT_KEPT, previous_turns, response_call
from app.server.responses.format import ResponsesReply
from app.server.responses.parsing import response_ask
from inference import SPARE_PRIORITY, ChatRequest, Delta, EngineClient, FinishReason, RequestError
from storage import ItemRecord, ItemResult, ResponsesRepository, StorageError

log = logging.getLogger(__name__)

CHAT, COMPLETIONS, EMBEDDINGS = "/v1/chat/completions", "/v1/completions", "/v1/embeddings"
RESPONSES = "/v1/responses"
ENDPOINTS = (CHAT, COMPLETIONS, EMBEDDINGS, RESPONSES)
Asked = tuple[Generation, Reply, Callable[[], None] | None]  # the call, its writer, what to do once answered


class BatchWork:
    def __init__(self, engine: EngineClient, endpoint: str, model_id: str, cap: int | None,
                 responses: ResponsesRepository | None = None, stored: Callable[[], None] | None = None,
                 image_hosts: tuple[str, ...] = ()) -> None:
        """responses: the server's stored responses (a /v1/responses batch reads and keeps
        them there; None: the server keeps none); stored: told after each one kept;
        image_hosts: those whose images a request may name by URL (fetched as the live
        routes fetch them)."""
        self.engine, self.model_id, self.cap, self.responses = engine, model_id, cap, responses
        self._told_stored = stored
        self.image_hosts = image_hosts
        self.ask: Callable[[dict], Asked]
        if endpoint == CHAT:
            info = engine.info
            template = info.chat_template if info is not None else None
            self.ask = lambda body: (tool_chat_generation(body, cap, template=template), tool_reply.CHAT, None)
        elif endpoint == COMPLETIONS:
            self.ask = lambda body: (completion_generation(body, cap), openai_reply.TEXT, None)
        elif endpoint == RESPONSES:
            self.ask = self._response
        else:
            raise ValueError(f"no batches for {endpoint}")

    def start(self, item: ItemRecord, request_id: str) -> ItemRun | ItemResult:
        """EngineError (the engine is down) passes: the runner pauses, the item stays pending."""
        try:
            gen, reply, answered = self.ask(self._with_images(item.fields))
            chat = self._prepared(gen)
        except ApiError as exc:
            return refused(exc, request_id)
        # One JSON answer, never a stream; at spare priority, below every chat and API call.
        gen = replace(gen, chat=replace(chat, priority=SPARE_PRIORITY), prompt_text=None, stream=False)
        chats = [replace(gen.choice(i), request_id=f"{request_id}-{i}") for i in range(gen.n)]
        call = Call(request_id, self.model_id, gen, [ChoiceTally() for _ in chats])
        return BatchRun(call, chats, reply, answered)

    def _with_images(self, body: dict) -> dict:
        """The body with the images it names by URL fetched (a copy: the item's fields stay
        as the batch's file gave them), on the runner's thread, as a live call's are."""
        if not self.image_hosts or not names_images_of(body, self.image_hosts):
            return body
        body = copy.deepcopy(body)
        fetch_remote_images(body, self.image_hosts)
        return body

    def _response(self, body: dict) -> Asked:
        ask = response_ask(body, self.cap)
        history: tuple[dict, ...] = ()
        if ask.previous_response_id is not None:
            if self.responses is None:
                raise ApiError(400, NOT_KEPT, param="previous_response_id")
            history = previous_turns(ask.previous_response_id, self._stored(ask.previous_response_id))
        gen, reply = response_call(ask, history, self.responses is not None)
        keep = self.responses is not None and ask.store
        return gen, reply, (lambda: self._keep(reply)) if keep else None

    def _stored(self, response_id: str) -> list[dict] | None:
        assert self.responses is not None
        try:
            return self.responses.conversation(response_id)
        except StorageError as exc:
            raise ApiError(503, f"the stored responses cannot be used: {exc}") from None

    def _keep(self, reply: ResponsesReply) -> None:
        """Best effort, as the live route: an answer is not lost because it cannot be kept."""
        if reply.saved is None or self.responses is None:
            return
        try:
            save_response(self.responses, reply.saved)
        except StorageError as exc:  # NotFoundError too: the response it continues was deleted meanwhile
            log.warning("response %s not stored: %s", reply.id, exc)
            return
        if self._told_stored is not None:
            self._told_stored()

    def _prepared(self, gen: Generation) -> ChatRequest:
        chat = gen.chat
        try:
            if gen.prompt_text is not None:
                chat = replace(chat, prompt_tokens=tuple(self.engine.text_tokens(gen.prompt_text)))
            return self.engine.prepare(chat)
        except RequestError as exc:
            raise ApiError(400, str(exc), param="messages" if chat.messages else "prompt") from None


class BatchRun:
    def __init__(self, call: Call, chats: list[ChatRequest], reply: Reply,
                 answered: Callable[[], None] | None = None) -> None:
        """answered: called once the answer is written (a Response is stored then)."""
        self.call, self.reply, self.answered = call, reply, answered
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
        if self.answered is not None:
            self.answered()
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
