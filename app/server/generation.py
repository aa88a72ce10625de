"""One generation call (/v1/chat/completions or /v1/completions) from a parsed body to its
answer: prepared off the loop, submitted as n engine requests, then either collected into
one JSON answer or streamed as events.

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

from app.server import openai_format as fmt
from app.server.engine_bridge import ChoiceDelta, Choices, ClientDisconnected, ServerStopping, unless_disconnected
from app.server.errors import ApiError
from app.server.request_parsing import Generation
from app.server.state import ServerState
from app.server.streaming import DONE, SSEResponse, event
from inference import ChatRequest, EngineError, FinishReason, RequestError

log = logging.getLogger(__name__)
T = TypeVar("T")

CLIENT_GONE = 499  # nginx's status for "the client closed the request": counted, never sent


async def prepared(state: ServerState, gen: Generation) -> ChatRequest:
    """Templating and tokenizing in a worker thread: a huge prompt must not hold the loop
    (or the engine's steps). A raw text prompt (/v1/completions) is tokenized as text with
    its special tokens parsed: the caller wrote the whole prompt, markup included."""
    chat = gen.chat
    try:
        if gen.prompt_text is not None:
            tokens = await anyio.to_thread.run_sync(state.engine.text_tokens, gen.prompt_text)
            chat = replace(chat, prompt_tokens=tuple(tokens))
        return await anyio.to_thread.run_sync(state.engine.prepare, chat)
    except RequestError as exc:
        raise ApiError(400, str(exc), param="messages" if chat.messages else "prompt") from None
    except EngineError as exc:
        raise ApiError(503, f"the engine is not available: {exc}") from None


async def run(state: ServerState, request: Request, gen: Generation, api: fmt.Api,
              release: Callable[[], None]) -> Response:
    """release: gives back the call's concurrency slot, once, when the call ends."""
    choices: Choices | None = None
    streaming = False
    try:
        gen = replace(gen, chat=await prepared(state, gen), prompt_text=None)
        choices = submit(state, gen)
        if gen.stream:
            response = await start_stream(state, request, gen, api, choices, release)
            streaming = isinstance(response, SSEResponse)  # else the client left before it began
            return response
        return await answer(state, request, gen, api, choices)
    finally:
        if not streaming:  # a stream cleans up when it ends
            if choices is not None:
                state.forget(choices)
            release()


def submit(state: ServerState, gen: Generation) -> Choices:
    if state.stopping:
        raise ApiError(503, "the server is stopping")
    choices = Choices(asyncio.get_running_loop())
    try:
        choices.submit(state.engine, [gen.choice(i) for i in range(gen.n)])
    except EngineError as exc:
        raise ApiError(503, f"the engine is not available: {exc}") from None
    state.track(choices)
    return choices


def _prompt_tokens(gen: Generation) -> int | None:
    tokens = gen.chat.prompt_tokens
    return len(tokens) if tokens is not None else None


def _refusal(tally: fmt.ChoiceTally) -> ApiError:
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


async def answer(state: ServerState, request: Request, gen: Generation, api: fmt.Api, choices: Choices) -> Response:
    tallies = [fmt.ChoiceTally() for _ in range(gen.n)]
    try:
        await _while_connected(_collect(choices, tallies), request, choices)
    except ClientDisconnected:
        return Response(status_code=CLIENT_GONE)
    finally:
        choices.cancel_open()  # a no-op once every choice finished
    for tally in tallies:
        if tally.finish is FinishReason.ERROR:
            raise _refusal(tally)
        if tally.finish is FinishReason.INTERRUPTED:
            raise _interrupted(tally.error)
    call_id = choices.handles[0].request_id
    return JSONResponse(fmt.completion(api, call_id, state.model_id, tallies, _prompt_tokens(gen),
                                       with_logprobs=gen.logprobs is not None))


async def _collect(choices: Choices, tallies: list[fmt.ChoiceTally]) -> None:
    while not choices.finished:
        item = await choices.next()
        tallies[item.index].add(item.delta)


# ----- a stream ------------------------------------------------------------------------------


async def start_stream(state: ServerState, request: Request, gen: Generation, api: fmt.Api, choices: Choices,
                       release: Callable[[], None]) -> Response:
    """Waits for the first delta before answering: a request the engine refuses at once
    (a bad chat, a prompt too long) gets a 400 like a plain call, not a stream that fails."""
    tallies = [fmt.ChoiceTally() for _ in range(gen.n)]
    try:
        first = await _while_connected(choices.next(), request, choices)
    except ClientDisconnected:
        return Response(status_code=CLIENT_GONE)
    tallies[first.index].add(first.delta)
    if first.delta.finish_reason is FinishReason.ERROR:
        choices.cancel_open()
        raise _refusal(tallies[first.index])

    def close() -> None:
        choices.cancel_open()
        state.forget(choices)
        release()

    return SSEResponse(_events(state, gen, api, choices, tallies, first), on_close=close)


async def _events(state: ServerState, gen: Generation, api: fmt.Api, choices: Choices,
                  tallies: list[fmt.ChoiceTally], first: ChoiceDelta) -> AsyncIterator[bytes]:
    call_id = choices.handles[0].request_id
    model = state.model_id

    def chunk(index: int, text: str | None, finish: str | None = None, role: bool = False,
              logprobs: dict | None = None) -> bytes:
        return event(fmt.chunk(api, call_id, model, index, text, finish, role, gen.include_usage, logprobs))

    def logprobs_of(item: ChoiceDelta) -> dict | None:
        if gen.logprobs is None or not item.delta.logprobs:
            return None
        offset = len(tallies[item.index].text) - len(item.delta.text)  # where this delta's text starts
        return fmt.logprobs_of(api, item.delta.logprobs, offset)

    if api.chat:
        for index in range(gen.n):
            yield chunk(index, None, role=True)
    item: ChoiceDelta | None = first  # already counted in its tally
    try:
        while item is not None:
            delta = item.delta
            if delta.finish_reason is FinishReason.ERROR:
                yield event(_refusal(tallies[item.index]).payload())
                return
            if delta.text or delta.logprobs:
                yield chunk(item.index, delta.text, logprobs=logprobs_of(item))
            if delta.finish_reason is FinishReason.INTERRUPTED:
                yield event(_interrupted(delta.error).payload())
                return
            if delta.finished:
                yield chunk(item.index, None, fmt.finish_reason(delta.finish_reason))
            item = None if choices.finished else await choices.next()
            if item is not None:
                tallies[item.index].add(item.delta)
    except ServerStopping:
        yield event(ApiError(503, "the server is stopping; the reply is cut here").payload())
        return
    if gen.include_usage:
        yield event(fmt.usage_chunk(api, call_id, model, fmt.usage(tallies, _prompt_tokens(gen))))
    yield DONE
