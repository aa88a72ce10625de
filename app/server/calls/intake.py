"""What every generation route does before its API's own part: refuse while stopping, take
a concurrency slot (429 beyond it), read the body under the server's limits, parse it, then
run the call (generation.py) with the API's Reply writing the answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import Response

from app.server.calls import generation
from app.server.calls.parsing import Generation
from app.server.calls.reply import Reply
from app.server.calls.state import ServerState
from app.server.http.body import ClientGone, parse_json_object, read_body
from app.server.http.errors import ApiError

T = TypeVar("T")
LOOP_PARSE_BYTES = 64 * 1024
# Words of a body whose parsing may compile a grammar (response_format's json_schema, the
# Responses API's text.format, tools' parameters and input_schema).
GRAMMAR_KEYS = (b"schema", b'"tools"', b"json_object")

# A body (a JSON object) and the server's max_tokens cap to what a route runs.
Build = Callable[[dict, "int | None"], T]


async def generate(state: ServerState, request: Request, build: Build[Generation], reply: Reply) -> Response:
    if state.stopping:
        raise ApiError(503, "the server is stopping")
    release = state.admit()
    try:
        gen = await parsed(state, request, build)
    except BaseException:
        release()
        raise
    return await generation.run(state, request, gen, reply, release)


async def parsed(state: ServerState, request: Request, build: Build[T]) -> T:
    """The body read under the server's limits, then build(body, max_tokens_cap)."""
    config = state.config
    try:
        raw = await read_body(request, config.max_body_bytes, config.body_timeout_s)
    except ClientGone:
        raise ApiError(400, "the client closed the connection before sending its body") from None

    def parse() -> T:
        return build(parse_json_object(raw), config.max_tokens_cap)

    # A big body (thousands of messages), or one that may bring a schema to compile, is
    # parsed in a worker thread: tens of milliseconds on the loop would delay every open
    # stream's next chunk.
    on_loop = len(raw) < LOOP_PARSE_BYTES and not any(key in raw for key in GRAMMAR_KEYS)
    return parse() if on_loop else await anyio.to_thread.run_sync(parse)
