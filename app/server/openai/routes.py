"""OpenAI's chat completions, completions and model list: the family's door (routes), on the
shared calls (calls/intake.py: concurrency slot, body limits; calls/generation.py: the run).

    GET  /v1/models             the loaded model, by its real name, with its context length
    POST /v1/chat/completions   chats, streaming or not, n choices, tools (tool_request.py)
    POST /v1/completions        raw prompts"""

from __future__ import annotations

from functools import partial

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.server.calls.intake import generate
from app.server.calls.state import ServerState
from app.server.http.routing import route
from app.server.openai import reply, tool_reply
from app.server.openai.parsing import completion_generation
from app.server.openai.tool_request import tool_chat_generation


def routes(state: ServerState) -> list[Route]:
    """The family's routes on this server's state (api.py lists the families)."""
    return [
        route("/v1/models", partial(models, state), "GET"),
        route("/v1/chat/completions", partial(chat_completions, state), "POST"),
        route("/v1/completions", partial(completions, state), "POST"),
    ]


async def models(state: ServerState, _request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [_model(state)]})


async def chat_completions(state: ServerState, request: Request) -> Response:
    # The template decides the tool format; off the loop: the first call reads the vocabulary.
    template = await anyio.to_thread.run_sync(_template, state)
    build = partial(tool_chat_generation, template=template)
    return await generate(state, request, build, tool_reply.CHAT)  # tools too


async def completions(state: ServerState, request: Request) -> Response:
    return await generate(state, request, completion_generation, reply.TEXT)


def _template(state: ServerState) -> str | None:
    """The engine's chat template source; None while it cannot tell (the generic format then)."""
    info = state.engine.info
    return info.chat_template if info is not None else None


def _model(state: ServerState) -> dict:
    """The served model, with its context length (OpenRouter's and LM Studio's name for it)
    once the engine has loaded it."""
    model: dict = {"id": state.model_id, "object": "model", "created": 0, "owned_by": "chorus"}
    info = state.engine.info
    if info is not None and info.n_ctx > 0:
        model["context_length"] = info.n_ctx
    return model
