"""OpenAI's chat completions, completions and model list: the family's door (routes), on the
shared calls (calls/intake.py: concurrency slot, body limits; calls/generation.py: the run).

    GET  /v1/models             the models served (state.models), by their real names, with
                                their context lengths
    POST /v1/chat/completions   chats, streaming or not, n choices, tools (tool_request.py)
    POST /v1/completions        raw prompts"""

from __future__ import annotations

from functools import partial

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.server.calls.intake import Build, OnEngine, generate
from app.server.calls.parsing import Generation
from app.server.calls.state import ServerState
from app.server.http.routing import route
from app.server.openai import reply, tool_reply
from app.server.openai.parsing import completion_generation
from app.server.openai.tool_request import tool_chat_generation
from inference import EngineClient


def routes(state: ServerState) -> list[Route]:
    """The family's routes on this server's state (api.py lists the families)."""
    return [
        route("/v1/models", partial(models, state), "GET"),
        route("/v1/chat/completions", partial(chat_completions, state), "POST"),
        route("/v1/completions", partial(completions, state), "POST"),
    ]


async def models(state: ServerState, _request: Request) -> Response:
    return JSONResponse({"object": "list", "data": state.models.listing()})


async def chat_completions(state: ServerState, request: Request) -> Response:
    # The template of the model the body names decides the tool format.
    return await generate(state, request, OnEngine(_tool_chat), tool_reply.CHAT)  # tools too


async def completions(state: ServerState, request: Request) -> Response:
    return await generate(state, request, completion_generation, reply.TEXT)


def _tool_chat(engine: EngineClient) -> Build[Generation]:
    """The chat build for the engine's chat template (None while it cannot tell: the generic
    format then); in a worker thread: the first call reads the vocabulary."""
    info = engine.info
    return partial(tool_chat_generation, template=info.chat_template if info is not None else None)
