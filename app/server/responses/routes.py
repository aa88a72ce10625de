"""OpenAI's Responses API on the same engine and under the same limits as the other routes
(a concurrency slot, the body limits, disconnects cancelling; calls/generation.py runs the call).
Only reading the body, continuing a stored response and writing the answer are its own.

    POST   /v1/responses         a response, streamed as the Responses events or not
    GET    /v1/responses/{id}    a stored response
    DELETE /v1/responses/{id}    {"id", "object": "response", "deleted": true}

previous_response_id continues a stored response: its conversation (input and output) goes
before this request's input, so the prompt begins with the previous one's tokens and the
engine's prefix cache reuses their KV rather than computing them again."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from functools import partial

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.server.calls import generation
from app.server.calls.intake import admitted
from app.server.calls.state import ServerState
from app.server.http.errors import ApiError
from app.server.http.routing import route
from app.server.http.streaming import SSEResponse
from app.server.responses.call import NOT_KEPT, previous_turns, response_call
from app.server.responses.format import ResponsesReply, stored_object
from app.server.responses.parsing import response_ask


def routes(state: ServerState) -> list[Route]:
    """The family's routes on this server's state (api.py lists the families)."""
    return [
        route("/v1/responses", partial(create, state), "POST"),
        route("/v1/responses/{response_id}", partial(stored, state), "GET", "DELETE"),
    ]


async def create(state: ServerState, request: Request) -> Response:
    ask, target, release = await admitted(state, request, response_ask)
    try:
        history = await _history(state, ask.previous_response_id)
    except BaseException:
        release()
        raise
    gen, reply = response_call(ask, history, state.responses.enabled)
    response = await generation.run(state, target, request, gen, reply, release)
    if not (ask.store and state.responses.enabled):
        return response
    if isinstance(response, SSEResponse):
        response.body_iterator = _saving(response.body_iterator, reply, state)
    elif reply.saved is not None:
        await state.responses.save(reply.saved)
    return response


async def stored(state: ServerState, request: Request) -> Response:
    if request.method == "DELETE":
        return await delete(state, request)
    return await retrieve(state, request)


async def retrieve(state: ServerState, request: Request) -> Response:
    record = await state.responses.get(_id_of(request))
    if record is None:
        raise _not_found(request)
    return JSONResponse(stored_object(record))


async def delete(state: ServerState, request: Request) -> Response:
    response_id = _id_of(request)
    if not await state.responses.delete(response_id):
        raise _not_found(request)
    return JSONResponse({"id": response_id, "object": "response", "deleted": True})


async def _history(state: ServerState, previous: str | None) -> tuple[dict, ...]:
    """The stored conversation a request continues, its reply last; () for none."""
    if previous is None:
        return ()
    if not state.responses.enabled:
        raise ApiError(400, NOT_KEPT, param="previous_response_id")
    return previous_turns(previous, await state.responses.conversation(previous))


async def _saving(events: AsyncIterable, reply: ResponsesReply, state: ServerState) -> AsyncIterator:
    """The stream's events, the response stored as soon as the reply ended and before its
    last events go out: a client that continues it on response.completed finds it."""
    async for chunk in events:
        if reply.saved is not None:
            record, reply.saved = reply.saved, None
            await state.responses.save(record)
        yield chunk


def _id_of(request: Request) -> str:
    return str(request.path_params["response_id"])


def _not_found(request: Request) -> ApiError:
    return ApiError(404, f"no stored response with id {_id_of(request)!r}")
