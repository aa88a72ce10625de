"""Anthropic's Messages API on the same engine and under the same limits as OpenAI's routes
(calls/intake.py: concurrency slot, body limits; calls/generation.py: disconnects cancel, the stream's
cleanup). Only the body's reading and the answer's writing are Anthropic's.

    POST /v1/messages               a message, streamed as Anthropic's events or not
    POST /v1/messages/count_tokens  {"input_tokens": N}: what the same body's usage says

Errors on these paths are in Anthropic's shape (http/errors.py goes by the path)."""

from __future__ import annotations

from functools import partial

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.server.anthropic.format import MESSAGES
from app.server.anthropic.parsing import chat_of, message_generation
from app.server.calls.generation import prepared
from app.server.calls.intake import generate, parsed
from app.server.calls.parsing import Generation
from app.server.calls.state import ServerState
from app.server.http.errors import ApiError
from app.server.http.routing import route


def routes(state: ServerState) -> list[Route]:
    """The family's routes on this server's state (api.py lists the families)."""
    return [
        route("/v1/messages", partial(messages, state), "POST"),
        route("/v1/messages/count_tokens", partial(count_tokens, state), "POST"),
    ]


async def messages(state: ServerState, request: Request) -> Response:
    return await generate(state, request, message_generation, MESSAGES)


async def count_tokens(state: ServerState, request: Request) -> Response:
    """The prompt's tokens as a message call would count them (templated the same way):
    tokenizing only, so no concurrency slot and no engine request."""
    chat, target = await parsed(state, request, lambda body, _cap: chat_of(body))
    try:
        tokens = (await prepared(target.engine, Generation(chat))).prompt_tokens
    finally:
        target.release()
    if tokens is None:  # the app's engine is remote, or still loading: nothing here can count
        raise ApiError(503, "the engine cannot count tokens here: no local model is loaded")
    return JSONResponse({"input_tokens": len(tokens)})
