"""What every generation route does before its API's own part: refuse while stopping, take
a concurrency slot (429 beyond it), read the body under the server's limits (fetching the
images it names by URL from the hosts the server was told to fetch from), open the model
it names (state.models: the one place a call finds its engine, for every API family), parse
it, then run the call (generation.py) with the API's Reply writing the answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import Response

from app.server.calls import generation
from app.server.calls.parsing import Generation
from app.server.calls.remote_images import fetch_remote_images, may_name_remote_images
from app.server.calls.reply import Reply
from app.server.calls.served import Target
from app.server.calls.state import ServerState
from app.server.http.body import ClientGone, parse_json_object, read_body
from app.server.http.errors import ApiError
from inference import EngineClient

T = TypeVar("T")
LOOP_PARSE_BYTES = 64 * 1024
# Words of a body whose parsing may compile a grammar (response_format's json_schema, the
# Responses API's text.format, tools' parameters and input_schema).
GRAMMAR_KEYS = (b"schema", b'"tools"', b"json_object")

# A body (a JSON object) and the server's max_tokens cap to what a route runs.
Build = Callable[[dict, "int | None"], T]


@dataclass(frozen=True)
class OnEngine(Generic[T]):
    """A build that depends on the model's engine (chat completions: its chat template picks
    the tool format): made, in a worker thread, once the call's model is open."""

    make: Callable[[EngineClient], Build[T]]


async def generate(state: ServerState, request: Request, build: Build[Generation] | OnEngine[Generation],
                   reply: Reply) -> Response:
    gen, target, release = await admitted(state, request, build)
    return await generation.run(state, target, request, gen, reply, release)


async def admitted(state: ServerState, request: Request,
                   build: Build[T] | OnEngine[T]) -> tuple[T, Target, Callable[[], None]]:
    """Refused while stopping, a concurrency slot taken, the body parsed with its model open;
    and the one release of both holds, for the caller to call when the call ends (here, if
    the body is refused)."""
    if state.stopping:
        raise ApiError(503, "the server is stopping")
    slot = state.admit()
    try:
        value, target = await parsed(state, request, build)
    except BaseException:
        slot()
        raise
    return value, target, both(slot, target.release)


def both(first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
    """One release for a call's two holds (its concurrency slot, its model); each is once-only."""

    def release() -> None:
        try:
            first()
        finally:
            second()

    return release


async def parsed(state: ServerState, request: Request, build: Build[T] | OnEngine[T]) -> tuple[T, Target]:
    """The body read under the server's limits, the model it names opened (loaded, if it
    must be), then build(body, max_tokens_cap). The caller releases the target when the
    call ends; here, if the build refuses the body."""
    config = state.config
    try:
        raw = await read_body(request, config.max_body_bytes, config.body_timeout_s)
    except ClientGone:
        raise ApiError(400, "the client closed the connection before sending its body") from None
    # A big body (thousands of messages), or one that may bring a schema to compile, is
    # parsed in a worker thread: tens of milliseconds on the loop would delay every open
    # stream's next chunk.
    on_loop = len(raw) < LOOP_PARSE_BYTES and not any(key in raw for key in GRAMMAR_KEYS)
    body = parse_json_object(raw) if len(raw) < LOOP_PARSE_BYTES else \
        await anyio.to_thread.run_sync(parse_json_object, raw)
    if config.image_hosts and may_name_remote_images(raw):
        await anyio.to_thread.run_sync(fetch_remote_images, body, config.image_hosts)
    target = await state.models.open(body)
    try:
        make: Build[T] = await anyio.to_thread.run_sync(build.make, target.engine) if isinstance(build, OnEngine) \
            else build

        def parse() -> T:
            return make(body, config.max_tokens_cap)

        return (parse() if on_loop else await anyio.to_thread.run_sync(parse)), target
    except BaseException:
        target.release()
        raise
