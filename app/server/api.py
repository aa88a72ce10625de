"""The Starlette app: routes of the OpenAI-compatible API, /health and /metrics.

    /v1/models             the loaded model, by its real name
    /v1/chat/completions   chats, streaming or not, n choices
    /v1/completions        raw prompts
    /health                200 once the model is loaded, 503 while loading or down
    /metrics               Prometheus text

Middleware, outermost first: HTTP metrics, the header size limit, the API key, Starlette's
error handling (every error in OpenAI's JSON shape, see errors.py)."""

from __future__ import annotations

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from app.server import generation
from app.server import openai_format as fmt
from app.server.auth import ApiKeyMiddleware
from app.server.body import ClientGone, parse_json_object, read_body
from app.server.errors import EXCEPTION_HANDLERS, ApiError, QuietErrors
from app.server.limits import HeaderLimitMiddleware
from app.server.metrics import EngineCollector, HttpMetrics, HttpMetricsMiddleware
from app.server.request_parsing import Generation, chat_generation, completion_generation
from app.server.state import ServerState

LOOP_PARSE_BYTES = 64 * 1024


def build_app(state: ServerState) -> ASGIApp:
    registry = CollectorRegistry()
    registry.register(EngineCollector(lambda: state.engine.metrics(fresh=True)))
    http_metrics = HttpMetrics(registry)

    async def models(_request: Request) -> Response:
        model = {"id": state.model_id, "object": "model", "created": 0, "owned_by": "chorus"}
        return JSONResponse({"object": "list", "data": [model]})

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
        return await _generate(state, request, fmt.CHAT)

    async def completions(request: Request) -> Response:
        return await _generate(state, request, fmt.TEXT)

    routes = [
        _route("/v1/models", models, "GET"),
        _route("/v1/chat/completions", chat_completions, "POST"),
        _route("/v1/completions", completions, "POST"),
        _route("/health", health, "GET"),
        _route("/metrics", metrics, "GET"),
    ]
    app = Starlette(routes=routes, exception_handlers=EXCEPTION_HANDLERS,
                    middleware=[Middleware(HttpMetricsMiddleware, metrics=http_metrics),
                                Middleware(HeaderLimitMiddleware, max_bytes=state.config.max_header_bytes),
                                Middleware(ApiKeyMiddleware, api_key=state.config.api_key)])
    return QuietErrors(app)


def _route(path: str, endpoint, method: str) -> Route:
    route = Route(path, endpoint, methods=[method])
    # Starlette answers HEAD wherever GET is allowed; this API has no use for it (405).
    route.methods = {method}
    return route


async def _generate(state: ServerState, request: Request, api: fmt.Api) -> Response:
    if state.stopping:
        raise ApiError(503, "the server is stopping")
    release = state.admit()
    try:
        gen = await _parsed(state, request, api)
    except BaseException:
        release()
        raise
    return await generation.run(state, request, gen, api, release)


async def _parsed(state: ServerState, request: Request, api: fmt.Api) -> Generation:
    config = state.config
    try:
        raw = await read_body(request, config.max_body_bytes, config.body_timeout_s)
    except ClientGone:
        raise ApiError(400, "the client closed the connection before sending its body") from None
    build = chat_generation if api.chat else completion_generation

    def parse() -> Generation:
        return build(parse_json_object(raw), config.max_tokens_cap)

    # A big body (thousands of messages) is parsed in a worker thread: tens of milliseconds
    # on the loop would delay every open stream's next chunk.
    return parse() if len(raw) < LOOP_PARSE_BYTES else await anyio.to_thread.run_sync(parse)
