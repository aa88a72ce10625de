"""The Starlette app: routes of the OpenAI-compatible API, Anthropic's Messages API,
/health and /metrics.

    /v1/models                      the loaded model, by its real name, with its context length
    /v1/chat/completions            chats, streaming or not, n choices
    /v1/completions                 raw prompts
    /v1/messages                    Anthropic's Messages (anthropic_routes.py)
    /v1/messages/count_tokens       a Messages body's input tokens
    /v1/responses                   OpenAI's Responses, stored ones read and deleted by id
                                    (responses_routes.py)
    /v1/embeddings                  the model's pooled embeddings (embeddings_routes.py)
    /health                         200 once the model is loaded, 503 while loading or down
    /metrics                        Prometheus text

Middleware, outermost first: HTTP metrics, the header size limit, CORS (when origins are
allowed: a browser's preflight carries no key, so it is answered before the key is asked),
the API key, Starlette's error handling (every error in the JSON shape of the path's API,
see errors.py)."""

from __future__ import annotations

from functools import partial

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from app.server import anthropic_routes, embeddings_routes, openai_reply, responses_routes, tool_reply
from app.server.auth import ApiKeyMiddleware
from app.server.calls import generate
from app.server.cors import cors_middleware
from app.server.errors import EXCEPTION_HANDLERS, ApiError, QuietErrors
from app.server.limits import HeaderLimitMiddleware
from app.server.metrics import EngineCollector, HttpMetrics, HttpMetricsMiddleware
from app.server.request_parsing import completion_generation
from app.server.state import ServerState
from app.server.tool_request import tool_chat_generation
from inference import EngineError


def build_app(state: ServerState) -> ASGIApp:
    registry = CollectorRegistry()
    registry.register(EngineCollector(lambda: state.engine.metrics(fresh=True)))
    http_metrics = HttpMetrics(registry)

    async def models(_request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model(state)]})

    async def health(_request: Request) -> Response:
        if state.stopping:
            raise ApiError(503, "the server is stopping")
        if not await anyio.to_thread.run_sync(state.ready):
            raise ApiError(503, "the model is not loaded yet (or its engine is down)")
        return JSONResponse({"status": "ok"})

    async def metrics(_request: Request) -> Response:
        # In a worker thread: a fresh engine snapshot waits for the engine's next step.
        text = await anyio.to_thread.run_sync(generate_latest, registry)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    async def chat_completions(request: Request) -> Response:
        # The template decides the tool format; off the loop: the first call reads the vocabulary.
        template = await anyio.to_thread.run_sync(_template, state)
        build = partial(tool_chat_generation, template=template)
        return await generate(state, request, build, tool_reply.CHAT)  # tools too

    async def completions(request: Request) -> Response:
        return await generate(state, request, completion_generation, openai_reply.TEXT)

    async def messages(request: Request) -> Response:
        return await anthropic_routes.messages(state, request)

    async def count_tokens(request: Request) -> Response:
        return await anthropic_routes.count_tokens(state, request)

    async def responses(request: Request) -> Response:
        return await responses_routes.create(state, request)

    async def stored_response(request: Request) -> Response:
        if request.method == "DELETE":
            return await responses_routes.delete(state, request)
        return await responses_routes.retrieve(state, request)

    async def embeddings(request: Request) -> Response:
        return await embeddings_routes.create(state, request)

    routes = [
        _route("/v1/models", models, "GET"),
        _route("/v1/chat/completions", chat_completions, "POST"),
        _route("/v1/completions", completions, "POST"),
        _route("/v1/messages", messages, "POST"),
        _route("/v1/messages/count_tokens", count_tokens, "POST"),
        _route("/v1/responses", responses, "POST"),
        _route("/v1/responses/{response_id}", stored_response, "GET", "DELETE"),
        _route("/v1/embeddings", embeddings, "POST"),
        _route("/health", health, "GET"),
        _route("/metrics", metrics, "GET"),
    ]
    config = state.config
    middleware = [Middleware(HttpMetricsMiddleware, metrics=http_metrics),
                  Middleware(HeaderLimitMiddleware, max_bytes=config.max_header_bytes),
                  *cors_middleware(config.cors_origins),
                  Middleware(ApiKeyMiddleware, api_key=config.api_key)]
    app = Starlette(routes=routes, exception_handlers=EXCEPTION_HANDLERS, middleware=middleware)
    return QuietErrors(app)


def _template(state: ServerState) -> str | None:
    """The engine's chat template source; None while it cannot tell (the generic format then)."""
    try:
        return state.engine.chat_template()
    except EngineError:
        return None


def _model(state: ServerState) -> dict:
    """The served model, with its context length (OpenRouter's and LM Studio's name for it)
    once the engine has loaded it."""
    model: dict = {"id": state.model_id, "object": "model", "created": 0, "owned_by": "chorus"}
    info = state.engine.info
    if info is not None and info.n_ctx > 0:
        model["context_length"] = info.n_ctx
    return model


def _route(path: str, endpoint, *methods: str) -> Route:
    route = Route(path, endpoint, methods=list(methods))
    # Starlette answers HEAD wherever GET is allowed; this API has no use for it (405).
    route.methods = set(methods)
    return route
