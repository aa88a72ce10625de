"""Server-sent events over Starlette's StreamingResponse: chunked transfer encoding, each
event `data: <json>\n\n` (OpenAI's, with a final `data: [DONE]`) or
`event: <name>\ndata: <json>\n\n` (Anthropic's). A server that dies mid-stream leaves the
chunked body unterminated, which HTTP clients (the official one included) report as an
error rather than a quiet end."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

DONE = b"data: [DONE]\n\n"


def event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


def named_event(name: str, payload: dict) -> bytes:
    return b"event: " + name.encode() + b"\n" + event(payload)


class SSEResponse(StreamingResponse):
    """An event stream that always runs its cleanup: on the normal end, on a client that
    disconnects (Starlette cancels the stream) and on a server that stops. The events
    generator is closed explicitly: cancelled while suspended at a yield, it would
    otherwise run its finally only when garbage collected."""

    def __init__(self, events: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(events, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._events = events
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()
            aclose = getattr(self._events, "aclose", None)
            if aclose is not None:
                await aclose()
