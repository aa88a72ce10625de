"""The Starlette app: every API family's routes, /health and /metrics, under the shared
middleware.

    openai/routes.py        /v1/models, /v1/chat/completions, /v1/completions
    anthropic/routes.py     /v1/messages, /v1/messages/count_tokens
    responses/routes.py     /v1/responses, stored ones read and deleted by id
    embeddings/routes.py    /v1/embeddings
    here                    /health: 200 once the model is loaded (a server of several models:
                            once it listens), 503 while loading or down;
                            /metrics: Prometheus text, a lane per loaded model
    batches/routes.py       /v1/files, /v1/batches: OpenAI's Files and Batch API

Middleware, outermost first: HTTP metrics, the header size limit, CORS (when origins are
allowed: a browser's preflight carries no key, so it is answered before the key is asked),
the API key, Starlette's error handling (every error in the JSON shape of the path's API,
see http/errors.py)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from app.server.anthropic import routes as anthropic
from app.server.batches import routes as batches
from app.server.batches.service import BatchService
from app.server.calls.state import ServerState
from app.server.embeddings import routes as embeddings
from app.server.http.auth import ApiKeyMiddleware
from app.server.http.cors import cors_middleware
from app.server.http.errors import EXCEPTION_HANDLERS, ApiError, QuietErrors
from app.server.http.limits import HeaderLimitMiddleware
from app.server.http.routing import route
from app.server.metrics import EngineCollector, HttpMetrics, HttpMetricsMiddleware
from app.server.openai import routes as openai
from app.server.responses import routes as responses

# The API families, each a folder whose routes.py is its one door: routes(state), the
# family's routes on this server's state. A new family is a new folder and one entry here.
FAMILIES: tuple[Callable[[ServerState], list[Route]], ...] = (
    openai.routes,
    anthropic.routes,
    responses.routes,
    embeddings.routes,
)


def build_app(state: ServerState, batch_service: BatchService | None = None) -> ASGIApp:
    registry = CollectorRegistry()
    registry.register(EngineCollector(lanes=state.models.lanes))  # each model's engine, or the one
    http_metrics = HttpMetrics(registry)

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

    routes = [family_route for family in FAMILIES for family_route in family(state)]
    if batch_service is not None:  # the one family with a service of its own (HttpServer's)
        routes += batches.routes(batch_service, lambda: state.config)
    routes += [route("/health", health, "GET"), route("/metrics", metrics, "GET")]
    config = state.config
    middleware = [Middleware(HttpMetricsMiddleware, metrics=http_metrics),
                  Middleware(HeaderLimitMiddleware, max_bytes=config.max_header_bytes),
                  *cors_middleware(config.cors_origins),
                  Middleware(ApiKeyMiddleware, api_key=config.api_key)]
    app = Starlette(routes=routes, exception_handlers=EXCEPTION_HANDLERS, middleware=middleware)
    return QuietErrors(app)
