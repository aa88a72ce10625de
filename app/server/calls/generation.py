"""One generation call (/v1/chat/completions, /v1/completions, /v1/messages) from a parsed
body to its answer: prepared off the loop, submitted as n engine requests, then either
collected into one JSON answer or streamed as events, written by the call's API (a Reply,
reply.py).

Whatever way a call ends (its answer sent, its client gone at any phase, the server
stopping, an error), the engine requests it still has open are cancelled, so an abandoned
request stops costing anything within one engine step."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.server.calls.engine_bridge import ChoiceDelta, Choices, ClientDisconnected, ServerStopping, unless_disconnected
from app.server.calls.parsing import Generation
from app.server.calls.reply import Call, ChoiceTally, Reply
from app.server.calls.served import Target
from app.server.calls.state import ServerState
from app.server.http.errors import ApiError
from app.server.http.streaming import SSEResponse
from inference import ChatRequest, EngineClient, EngineError, FinishReason, Owner, RequestError, api_owner

log = logging.getLogger(__name__)
T = TypeVar("T")

CLIENT_GONE = 499  # nginx's status for "the client closed the request": counted, never sent


async def prepared(engine: EngineClient, gen: Generation) -> ChatRequest:
    """Templating and tokenizing in a worker thread: a huge prompt must not hold the loop
    (or the engine's steps). A raw text prompt (/v1/completions) is tokenized as text with
    its special tokens parsed: the caller wrote the whole prompt, markup included."""
    chat = gen.chat
    try:
        if gen.prompt_text is not None:
            tokens = await anyio.to_thread.run_sync(engine.text_tokens, gen.prompt_text)
            chat = replace(chat, prompt_tokens=tuple(tokens))
        return await anyio.to_thread.run_sync(engine.prepare, chat)
    except RequestError as exc:
        raise ApiError(400, str(exc), param=gen.messages_param if chat.messages else "prompt") from None
    except EngineError as exc:
        raise ApiError(503, f"the engine is not available: {exc}") from None


async def run(state: ServerState, target: Target, request: Request, gen: Generation, reply: Reply,
              release: Callable[[], None]) -> Response:
    """target: the model the call runs on; release: gives back the call's concurrency slot
    and its hold on the model, once, when the call ends."""
    choices: Choices | None = None
    streaming = False
    try:
        chat = replace(await prepared(target.engine, gen), owner=client_owner(request))
        gen = replace(gen, chat=chat, prompt_text=None)
        choices = submit(state, target, gen)
        call = Call(choices.handles[0].request_id, target.model_id, gen, [ChoiceTally() for _ in range(gen.n)])
        if gen.stream:
            response = await start_stream(state, request, call, reply, choices, release)
            streaming = isinstance(response, SSEResponse)  # else the client left before it began
            return response
        return await answer(request, call, reply, choices)
    finally:
        if not streaming:  # a stream cleans up when it ends
            if choices is not None:
                state.forget(choices)
            release()


def client_owner(request: Request) -> Owner:
    """The call's lane in the engine's metrics: its client's user agent ("OpenAI/Python
    1.54.0", "curl/8.5.0"; the server has one API key, so no key names one), else its address."""
    agent = request.headers.get("user-agent", "").strip()
    return api_owner(agent or (request.client.host if request.client else "unknown"))


def submit(state: ServerState, target: Target, gen: Generation) -> Choices:
    if state.stopping:
        raise ApiError(503, "the server is stopping")
    choices = Choices(asyncio.get_running_loop())
    try:
        choices.submit(target.engine, [gen.choice(i) for i in range(gen.n)])
    except EngineError as exc:
        raise ApiError(503, f"the engine is not available: {exc}") from None
    state.track(choices)
    return choices


def _refusal(tally: ChoiceTally) -> ApiError:
    """A choice that ended in an error: a 400 for a request the engine refused before
    generating (a prompt too long), a 500 for one that failed mid-reply."""
    if tally.tokens == 0:
        return ApiError(400, tally.error or "the engine refused the request")
    return ApiError(500, f"the engine failed mid-reply: {tally.error}")


def _interrupted(error: str | None) -> ApiError:
    """The engine's process died under the reply: an error the client sees (as when the
    server itself dies), never a reply that looks finished but was cut."""
    log.warning("the engine stopped mid-reply: %s", error)
    return ApiError(503, f"the reply was cut: {error or 'the engine stopped'}; retry once the server is healthy")


async def _while_connected(work: Awaitable[T], request: Request, choices: Choices) -> T:
    """work's result, unless the client leaves (ClientDisconnected) or the server stops (a
    503) first; either way the call's engine requests are cancelled."""
    try:
        return await unless_disconnected(work, request.receive)
    except ClientDisconnected:
        choices.cancel_open()
        raise
    except ServerStopping:
        choices.cancel_open()
        raise ApiError(503, "the server is stopping; retry against another one or later") from None


# ----- one JSON answer -----------------------------------------------------------------------


async def answer(request: Request, call: Call, reply: Reply, choices: Choices) -> Response:
    try:
        await _while_connected(_collect(choices, call.tallies), request, choices)
    except ClientDisconnected:
        return Response(status_code=CLIENT_GONE)
    finally:
        choices.cancel_open()  # a no-op once every choice finished
    for tally in call.tallies:
        if tally.finish is FinishReason.ERROR:
            raise _refusal(tally)
        if tally.finish is FinishReason.INTERRUPTED:
            raise _interrupted(tally.error)
    return JSONResponse(reply.answer(call))


async def _collect(choices: Choices, tallies: list[ChoiceTally]) -> None:
    while not choices.finished:
        item = await choices.next()
        tallies[item.index].add(item.delta)


# ----- a stream ------------------------------------------------------------------------------


async def start_stream(state: ServerState, request: Request, call: Call, reply: Reply, choices: Choices,
                       release: Callable[[], None]) -> Response:
    """Waits for the first delta before answering: a request the engine refuses at once
    (a bad chat, a prompt too long) gets a 400 like a plain call, not a stream that fails."""
    try:
        first = await _while_connected(choices.next(), request, choices)
    except ClientDisconnected:
        return Response(status_code=CLIENT_GONE)
    call.tallies[first.index].add(first.delta)
    if first.delta.finish_reason is FinishReason.ERROR:
        choices.cancel_open()
        raise _refusal(call.tallies[first.index])

    def close() -> None:
        choices.cancel_open()
        state.forget(choices)
        release()

    return SSEResponse(_events(reply, call, choices, first), on_close=close)


async def _events(reply: Reply, call: Call, choices: Choices, first: ChoiceDelta) -> AsyncIterator[bytes]:
    for opening in reply.opening(call):
        yield opening
    item: ChoiceDelta | None = first  # already counted in its tally
    try:
        while item is not None:
            delta = item.delta
            if delta.finish_reason is FinishReason.ERROR:
                yield reply.error(call, _refusal(call.tallies[item.index]))
                return
            for piece in reply.text(call, item):
                yield piece
            if delta.finish_reason is FinishReason.INTERRUPTED:
                yield reply.error(call, _interrupted(delta.error))
                return
            if delta.finished:
                for piece in reply.finish(call, item):
                    yield piece
            item = None if choices.finished else await choices.next()
            if item is not None:
                call.tallies[item.index].add(item.delta)
    except ServerStopping:
        yield reply.error(call, ApiError(503, "the server is stopping; the reply is cut here"))
        return
    for closing in reply.closing(call):
        yield closing
