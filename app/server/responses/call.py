"""What a Responses request runs, whoever sends it: the live route (routes.py) and a batch
line for /v1/responses (batches/work.py). The stored response it continues (if any) goes
before its input, instructions become the first system message, and the reply's writer
repeats the request's settings."""

from __future__ import annotations

import uuid

from app.server.calls.parsing import Generation
from app.server.http.errors import ApiError
from app.server.responses.format import ResponsesReply, Settings
from app.server.responses.parsing import ID_PREFIX, ResponseAsk
from inference import ChatRequest

NOT_KEPT = "previous_response_id: this server keeps no responses (it has no database)"


def previous_turns(previous_id: str, turns: list[dict] | None) -> tuple[dict, ...]:
    """The stored conversation a request continues, its reply last (None: not stored)."""
    if turns is None:
        raise ApiError(404, f"no stored response with id {previous_id!r} (deleted, or stored elsewhere)",
                       param="previous_response_id")
    return tuple(turns)


def response_call(ask: ResponseAsk, history: tuple[dict, ...], can_store: bool) -> tuple[Generation, ResponsesReply]:
    """history: previous_turns of the response it continues, () for none; can_store: whether
    this server keeps responses (store is false in the answer where it does not)."""
    conversation = history + ask.input
    reply = ResponsesReply(ID_PREFIX + uuid.uuid4().hex, _settings(ask, can_store), ask.input)
    system = () if ask.instructions is None else ({"role": "system", "content": ask.instructions},)
    gen = Generation(ChatRequest(messages=system + conversation, sampling=ask.sampling), stream=ask.stream,
                     messages_param="input")
    return gen, reply


def _settings(ask: ResponseAsk, can_store: bool) -> Settings:
    return Settings(instructions=ask.instructions, max_output_tokens=ask.max_output_tokens,
                    temperature=ask.temperature, top_p=ask.top_p,
                    previous_response_id=ask.previous_response_id, store=ask.store and can_store)
